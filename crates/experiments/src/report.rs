//! One report for every reproduction: each run of a plan leaves a card
//! (`report.json`) in its output directory; [`write_index`] reads the cards
//! of `DIR/*/` and writes `DIR/index.html` — one self-contained page (inline
//! style, figures linked beside it, no network fetches) with each
//! reproduction's claims (the seed's figure beside ours), its figures, and
//! its README.
//!
//! The page counts its figures when it loads and writes the result into
//! `<body data-figures=… data-figures-loaded=… data-figures-broken=…>`, so a
//! headless browser's DOM dump says whether every figure was shown.

use crate::claims::ClaimResult;
use crate::schema::Schema;
use pulldown_cmark::{html, CowStr, Event, LinkType, Options as MdOptions, Parser, Tag, TagEnd};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The card's file name in a reproduction's output directory.
pub const CARD_FILE: &str = "report.json";

/// The page [`write_index`] writes.
pub const INDEX_FILE: &str = "index.html";

/// A figure a reproduction wrote.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Figure {
    /// File name, relative to the reproduction's directory.
    pub file: String,
    /// What it shows.
    pub caption: String,
    /// The seed document's figure it reproduces, if any (`thesis Fig. 5.4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproduces: Option<String>,
}

/// A reproduction's `README.md`: a title, the command that made it, an
/// introduction, the list of figures, the plan's notes under
/// `notes_heading`, then the summary's markdown.
pub fn readme_page(
    title: &str,
    command: &str,
    intro: &str,
    figures: &[Figure],
    notes_heading: &str,
    notes: Option<&str>,
    md: &str,
) -> String {
    let mut r = String::new();
    let _ = writeln!(r, "# {title}\n");
    let _ = writeln!(r, "```sh\n{command}\n```\n");
    let _ = writeln!(r, "{intro}\n");
    let _ = writeln!(r, "## Figures\n");
    for f in figures {
        let _ = writeln!(
            r,
            "- [{}]({}): {}{}",
            f.file,
            f.file,
            f.caption,
            f.reproduces
                .as_ref()
                .map(|x| format!(" — reproduces {x}"))
                .unwrap_or_default()
        );
    }
    r.push('\n');
    if let Some(n) = notes {
        let _ = writeln!(r, "## {notes_heading}\n\n{}\n", n.trim());
    }
    r.push_str(md);
    r
}

/// The end of a README whose notes follow the results: the figures (if
/// any, with their captions), the summary's markdown one heading level
/// down, then the plan's notes under "Where and why our numbers differ from
/// the seed's".
pub fn readme_tail(figures: &[Figure], md: &str, notes: Option<&str>) -> String {
    let mut r = String::new();
    if !figures.is_empty() {
        let _ = writeln!(r, "## Figures\n");
        for f in figures {
            let _ = writeln!(r, "- [{}]({}): {}", f.file, f.file, f.caption);
        }
        let _ = writeln!(r);
    }
    let _ = writeln!(r, "{}", md.replacen("# ", "## ", 1));
    if let Some(n) = notes {
        let _ = writeln!(r, "## Where and why our numbers differ from the seed's\n");
        let _ = writeln!(r, "{}", n.trim());
    }
    r
}

/// What the index needs from one reproduction (`report.json`).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Card {
    /// `hollywood.report-card`, version 1.
    pub schema: Schema,
    /// The plan's name (and directory).
    pub name: String,
    /// Heading.
    pub title: String,
    /// What it reproduces.
    pub description: String,
    /// The seed document and sections.
    #[serde(default)]
    pub source: Option<String>,
    /// The command that produced it.
    pub command: String,
    /// Seeds run.
    pub seeds: Vec<u64>,
    /// Runs made.
    pub runs: usize,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// The plan's claims, checked.
    pub claims: Vec<ClaimResult>,
    /// Figures, in reading order.
    pub figures: Vec<Figure>,
    /// Other files in the directory (summary.json, …).
    pub files: Vec<String>,
}

impl Card {
    /// The card's schema.
    pub fn schema() -> Schema {
        Schema::new("hollywood.report-card", 1)
    }
}

/// Escape text for HTML.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// A link in a reproduction's README, as seen from the index one directory
/// up: relative file links get the directory in front; absolute URLs,
/// anchors and absolute paths stay.
fn rebase(dest: &str, dir: &str) -> String {
    if is_external(dest) || dest.starts_with('#') || dest.starts_with('/') || dest.is_empty() {
        dest.to_string()
    } else {
        format!("{dir}/{dest}")
    }
}

/// A URL that leaves the page's directory tree (a scheme, `//host`, mail).
fn is_external(dest: &str) -> bool {
    dest.contains("://") || dest.starts_with("//") || dest.starts_with("mailto:")
}

/// Markdown to HTML, links rebased into `dir`. An image from another host
/// becomes a plain link (the page fetches nothing from the network).
fn markdown(md: &str, dir: &str) -> String {
    let mut opts = MdOptions::empty();
    opts.insert(MdOptions::ENABLE_TABLES);
    let mut in_external_image = false;
    let events = Parser::new_ext(md, opts).map(|e| match e {
        Event::Start(Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Link {
            link_type,
            dest_url: if link_type == LinkType::Email {
                dest_url
            } else {
                CowStr::from(rebase(&dest_url, dir))
            },
            title,
            id,
        }),
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) if is_external(&dest_url) => {
            in_external_image = true;
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            })
        }
        Event::End(TagEnd::Image) if in_external_image => {
            in_external_image = false;
            Event::End(TagEnd::Link)
        }
        Event::Start(Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }) => Event::Start(Tag::Image {
            link_type,
            dest_url: CowStr::from(rebase(&dest_url, dir)),
            title,
            id,
        }),
        // Raw HTML in a README is shown as text, never interpreted.
        Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
        other => other,
    });
    let mut out = String::new();
    html::push_html(&mut out, events);
    out
}

/// A file name the page can link to as is: no directories, no `..`, nothing
/// that needs URL encoding.
fn safe_file(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The cards under `dir` (one per subdirectory with a `report.json`),
/// sorted by name.
pub fn read_cards(dir: &Path) -> Result<Vec<Card>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut cards = Vec::new();
    for e in entries {
        let e = e.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let path = e.path().join(CARD_FILE);
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let card: Card = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a report card: {e}", path.display()))?;
        if card.schema.name != Card::schema().name || card.schema.version > Card::schema().version {
            return Err(format!(
                "{}: schema {} v{} is not one this version reads ({} v{})",
                path.display(),
                card.schema.name,
                card.schema.version,
                Card::schema().name,
                Card::schema().version
            ));
        }
        if let Some(bad) = card
            .figures
            .iter()
            .map(|f| &f.file)
            .chain(card.files.iter())
            .find(|f| !safe_file(f))
        {
            return Err(format!(
                "{}: file name '{bad}' must be a plain name in the reproduction's directory \
                 (letters, digits, '-', '_', '.')",
                path.display()
            ));
        }
        let dir_name = e.file_name().to_string_lossy().into_owned();
        if dir_name != card.name {
            return Err(format!(
                "{} names plan '{}' but lies in directory '{dir_name}'",
                path.display(),
                card.name
            ));
        }
        cards.push(card);
    }
    if cards.is_empty() {
        return Err(format!(
            "no results under {}: expected DIR/<plan>/{CARD_FILE} (run `hollywood repro all --out {}`)",
            dir.display(),
            dir.display()
        ));
    }
    cards.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(cards)
}

const STYLE: &str = "
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.holds { color: #1a7f37; font-weight: bold; }
.differs { color: #b42318; font-weight: bold; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.9em; color: #555; }
code { background: #f5f5f5; padding: 0 0.2em; }
details { margin: 1em 0; }
";

/// Counts figures once everything has loaded (no network: local files only).
const SCRIPT: &str = "
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img.figure');
  var ok = 0, broken = [];
  imgs.forEach(function (i) { if (i.complete && i.naturalWidth > 0) { ok++; } else { broken.push(i.getAttribute('src')); } });
  document.body.dataset.figures = imgs.length;
  document.body.dataset.figuresLoaded = ok;
  document.body.dataset.figuresBroken = broken.length;
  document.getElementById('figure-status').textContent =
    ok + ' of ' + imgs.length + ' figures shown' + (broken.length ? '; missing: ' + broken.join(', ') : '');
});
";

/// Render the index page for `cards`, whose directories lie beside it.
pub fn render_index(cards: &[Card], readmes: &[Option<String>]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Hollywood reproductions</title><style>{STYLE}</style></head>\n<body>\n\
         <h1>Hollywood: reproductions of the seed documents</h1>\n\
         <p id=\"figure-status\">figures not yet counted</p>\n"
    );
    let _ = writeln!(
        h,
        "<table><tr><th>reproduction</th><th>source</th><th>claims</th>\
         <th>runs</th><th>seeds</th><th>wall time</th></tr>"
    );
    for c in cards {
        let counts = crate::claims::Counts::of(&c.claims);
        let _ =
            writeln!(
            h,
            "<tr><td><a href=\"#{n}\">{t}</a></td><td>{s}</td><td class=\"{cls}\">{counts}</td>\
             <td>{runs}</td><td>{seeds}</td><td>{wall:.1} s</td></tr>",
            n = escape(&c.name),
            t = escape(&c.title),
            s = escape(c.source.as_deref().unwrap_or("")),
            cls = if counts.hold == counts.checked() { "holds" } else { "differs" },
            runs = c.runs,
            seeds = c.seeds.len(),
            wall = c.wall_seconds
        );
    }
    let _ = writeln!(h, "</table>");
    for (i, c) in cards.iter().enumerate() {
        let dir = escape(&c.name);
        let _ = writeln!(
            h,
            "<section id=\"{dir}\">\n<h2>{}</h2>\n<p>{}</p>\n<p>Produced by <code>{}</code> \
             ({} runs, seeds {}–{}, {:.1} s). Files: {}.</p>",
            escape(&c.title),
            escape(&c.description),
            escape(&c.command),
            c.runs,
            c.seeds.first().unwrap_or(&0),
            c.seeds.last().unwrap_or(&0),
            c.wall_seconds,
            c.files
                .iter()
                .map(|f| format!("<a href=\"{dir}/{0}\">{0}</a>", escape(f)))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if !c.claims.is_empty() {
            let _ = writeln!(
                h,
                "<h3>Claims</h3>\n<table><tr><th>configuration</th><th>claim</th><th>source</th>\
                 <th>the seed says</th><th>checked</th><th>ours</th><th></th></tr>"
            );
            for cl in &c.claims {
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} {}</td><td>{}</td>\
                     <td class=\"{}\">{}</td></tr>",
                    escape(&cl.config),
                    escape(&cl.claim),
                    escape(cl.source.as_deref().unwrap_or("")),
                    escape(cl.stated.as_deref().unwrap_or("")),
                    escape(&cl.metric),
                    escape(&cl.expectation),
                    escape(&cl.observed),
                    if cl.outcome == crate::claims::Outcome::Fails {
                        "differs"
                    } else {
                        "holds"
                    },
                    match &cl.why {
                        Some(why) => escape(&format!("{}: {why}", cl.outcome.word())),
                        None => cl.outcome.word().to_string(),
                    }
                );
            }
            let _ = writeln!(h, "</table>");
        }
        if !c.figures.is_empty() {
            let _ = writeln!(h, "<h3>Figures</h3>");
            for f in &c.figures {
                let src = format!("{dir}/{}", escape(&f.file));
                let _ = writeln!(
                    h,
                    "<figure><a href=\"{src}\"><img class=\"figure\" src=\"{src}\" alt=\"{alt}\"></a>\
                     <figcaption>{cap}{rep}</figcaption></figure>",
                    alt = escape(&f.caption),
                    cap = escape(&f.caption),
                    rep = f
                        .reproduces
                        .as_ref()
                        .map(|r| format!(" — reproduces {}", escape(r)))
                        .unwrap_or_default()
                );
            }
        }
        if let Some(Some(md)) = readmes.get(i) {
            let _ = writeln!(
                h,
                "<details><summary>README: setup, results and where ours differs from the seed</summary>\n{}</details>",
                markdown(md, &c.name)
            );
        }
        let _ = writeln!(h, "</section>");
    }
    let _ = writeln!(h, "<script>{SCRIPT}</script>\n</body></html>");
    h
}

/// Every file the page links to that does not exist (relative to `dir`).
pub fn missing_files(cards: &[Card], dir: &Path) -> Vec<PathBuf> {
    cards
        .iter()
        .flat_map(|c| {
            c.figures
                .iter()
                .map(|f| &f.file)
                .chain(c.files.iter())
                .map(move |f| dir.join(&c.name).join(f))
        })
        .filter(|p| !p.is_file())
        .collect()
}

/// Read the cards under `dir` and write `dir/index.html`; fails if a figure
/// or file a card names is missing.
pub fn write_index(dir: &Path) -> Result<PathBuf, String> {
    let cards = read_cards(dir)?;
    let missing = missing_files(&cards, dir);
    if !missing.is_empty() {
        return Err(format!(
            "results are incomplete, missing: {}",
            missing
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let readmes: Vec<Option<String>> = cards
        .iter()
        .map(|c| std::fs::read_to_string(dir.join(&c.name).join("README.md")).ok())
        .collect();
    let path = dir.join(INDEX_FILE);
    std::fs::write(&path, render_index(&cards, &readmes))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(name: &str) -> Card {
        Card {
            schema: Card::schema(),
            name: name.into(),
            title: format!("Title <{name}>"),
            description: "d".into(),
            source: Some("thesis ch. 5".into()),
            command: "hollywood repro x".into(),
            seeds: vec![1, 2],
            runs: 4,
            wall_seconds: 1.5,
            claims: vec![ClaimResult {
                scenario: "s".into(),
                transport: "tcp".into(),
                config: "s tcp".into(),
                metric: "late".into(),
                claim: "none late".into(),
                source: Some("Fig. 5.4".into()),
                stated: Some("0".into()),
                expectation: "≤ 0 on every seed".into(),
                observed: "max 0.00 (seed 1)".into(),
                holds: true,
                outcome: crate::claims::Outcome::Holds,
                why: None,
            }],
            figures: vec![Figure {
                file: "a.png".into(),
                caption: "a plot".into(),
                reproduces: Some("thesis Fig. 5.4".into()),
            }],
            files: vec!["README.md".into()],
        }
    }

    #[test]
    fn cards_round_trip_and_the_page_escapes_and_rebases() {
        let c = card("ch5");
        let back: Card = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        let md = "# R\n\n| a | b |\n|---|---|\n| [f](f.png) | <b>x</b> |\n\n[ext](https://x.org/) [top](#r) \
                  ![far](//cdn.example/a.png) ![web](https://cdn.example/b.png) <a@b.c>";
        let page = render_index(&[c], &[Some(md.into())]);
        assert!(page.contains("Title &lt;ch5&gt;"));
        assert!(page.contains("src=\"ch5/a.png\""));
        assert!(page.contains("href=\"ch5/f.png\""));
        assert!(page.contains("href=\"https://x.org/\""));
        assert!(page.contains("href=\"#r\""));
        assert!(page.contains("<table>"), "markdown tables render");
        assert!(page.contains("&lt;b&gt;x&lt;/b&gt;"), "raw HTML is text");
        assert!(page.contains("reproduces thesis Fig. 5.4"));
        assert!(!page.contains("src=\"https") && !page.contains("src=\"//"));
        assert!(
            page.contains("href=\"//cdn.example/a.png\""),
            "a remote image is a link"
        );
        assert!(
            page.contains("href=\"mailto:a@b.c\""),
            "mail is not rebased"
        );
    }

    #[test]
    fn index_needs_cards_and_every_file_they_name() {
        let dir = std::env::temp_dir().join(format!("hollywood-index-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ch5")).unwrap();
        assert!(write_index(&dir).unwrap_err().contains("no results"));
        std::fs::write(
            dir.join("ch5").join(CARD_FILE),
            serde_json::to_string(&card("ch5")).unwrap(),
        )
        .unwrap();
        let e = write_index(&dir).unwrap_err();
        assert!(e.contains("a.png") && e.contains("README.md"), "{e}");
        std::fs::write(dir.join("ch5/a.png"), b"x").unwrap();
        std::fs::write(dir.join("ch5/README.md"), "# hi").unwrap();
        let p = write_index(&dir).unwrap();
        assert!(std::fs::read_to_string(p).unwrap().contains("<h1>hi</h1>"));
        std::fs::create_dir_all(dir.join("other")).unwrap();
        std::fs::write(
            dir.join("other").join(CARD_FILE),
            serde_json::to_string(&card("ch5")).unwrap(),
        )
        .unwrap();
        assert!(write_index(&dir).unwrap_err().contains("lies in directory"));
        let mut c = card("other");
        c.figures[0].file = "../../etc/passwd".into();
        std::fs::write(
            dir.join("other").join(CARD_FILE),
            serde_json::to_string(&c).unwrap(),
        )
        .unwrap();
        assert!(write_index(&dir).unwrap_err().contains("plain name"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
