//! Line, point and region charts written to PNG or SVG (chosen by the file
//! extension), on the `plotters` crate.
//!
//! The charts are the thesis's kinds: the region plots of Fig. 5.1/5.2/5.11
//! (shaded polygons bounded by lines) and the per-message plots of
//! Fig. 5.4–5.16 (buffered time and transport delay, two panels stacked, with
//! crosses for lost messages).
//!
//! Text is rendered by plotters' pure-Rust `ab_glyph` rasteriser from a TTF
//! file read at run time — [`FONT_PATH`] (Debian package `fonts-dejavu-core`),
//! or the file named by the `HOLLYWOOD_FONT` environment variable — so no
//! system C library (fontconfig, freetype) is needed. SVG output needs the
//! font too: plotters measures text to lay out the axes.
//!
//! Everything is clipped to the chart's ranges here, before it reaches
//! plotters: a polygon or line that leaves the ranges never paints over the
//! axes.
//!
//! ```ignore
//! let chart = Chart {
//!     title: "transport delay".into(),
//!     x_label: "message".into(),
//!     y_label: "ms".into(),
//!     series: vec![Series::new("delay", points, Style::Line, Rgb::BLUE)],
//!     ..Chart::default()
//! };
//! plot::draw(&chart, Path::new("delay.png"))?;
//! ```

use plotters::coord::Shift;
use plotters::prelude::*;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The TTF font used for all text unless `HOLLYWOOD_FONT` names another.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Environment variable that overrides [`FONT_PATH`].
pub const FONT_ENV: &str = "HOLLYWOOD_FONT";

/// Size in pixels of a single chart drawn by [`draw`].
pub const SIZE: (u32, u32) = (1000, 600);

/// Height in pixels of each panel drawn by [`draw_stacked`] (width as [`SIZE`]).
pub const PANEL_HEIGHT: u32 = 420;

/// An RGB colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    /// Black.
    pub const BLACK: Rgb = Rgb(0, 0, 0);
    /// Mid grey.
    pub const GREY: Rgb = Rgb(128, 128, 128);
    /// Red (lost or late messages; wasteful retransmissions).
    pub const RED: Rgb = Rgb(214, 39, 40);
    /// Green (useful retransmissions).
    pub const GREEN: Rgb = Rgb(44, 160, 44);
    /// Blue.
    pub const BLUE: Rgb = Rgb(31, 119, 180);
    /// Orange (head-of-line blocking region, Fig. 5.11).
    pub const ORANGE: Rgb = Rgb(255, 127, 14);
    /// Purple.
    pub const PURPLE: Rgb = Rgb(148, 103, 189);

    fn rgb(self) -> RGBColor {
        RGBColor(self.0, self.1, self.2)
    }
}

/// How a series is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// A polyline through the points in order (2 px).
    Line,
    /// A small filled circle at each point.
    Points,
    /// An × at each point (the thesis's marks for lost messages).
    Crosses,
}

/// One named data series.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend label; an empty name leaves the series out of the legend.
    pub name: String,
    /// Data points `(x, y)`; non-finite points are skipped.
    pub points: Vec<(f64, f64)>,
    /// Line, points or crosses.
    pub style: Style,
    /// Colour.
    pub color: Rgb,
}

impl Series {
    /// A series from its parts.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>, style: Style, color: Rgb) -> Self {
        Series {
            name: name.into(),
            points,
            style,
            color,
        }
    }
}

/// A horizontal reference line across the whole x range (e.g. `y = 0`).
#[derive(Clone, Debug, PartialEq)]
pub struct HLine {
    /// Where.
    pub y: f64,
    /// Colour.
    pub color: Rgb,
    /// Legend label; empty leaves it out of the legend.
    pub label: String,
}

/// A filled polygon (drawn under the series and lines).
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// Legend label; empty leaves it out of the legend.
    pub label: String,
    /// Vertices in data coordinates, in order; the polygon closes itself.
    pub polygon: Vec<(f64, f64)>,
    /// Fill colour.
    pub fill: Rgb,
    /// Fill opacity in `[0, 1]`.
    pub opacity: f64,
}

/// One chart: axes, optional fixed ranges, series, reference lines, regions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Chart {
    /// Caption above the chart.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// Fixed x range; `None` fits the data (series, regions) with a 3 % margin.
    pub x_range: Option<(f64, f64)>,
    /// Fixed y range; `None` fits the data (series, regions, lines).
    pub y_range: Option<(f64, f64)>,
    /// Data series, drawn in order on top of everything else.
    pub series: Vec<Series>,
    /// Horizontal reference lines.
    pub hlines: Vec<HLine>,
    /// Shaded regions, drawn first.
    pub regions: Vec<Region>,
}

/// Why a chart could not be drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum PlotError {
    /// The output path has no `.png` or `.svg` extension.
    UnsupportedFormat(PathBuf),
    /// The font file could not be read or parsed.
    Font {
        /// The file tried.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A range is empty, reversed or not finite, or there is nothing to fit
    /// an automatic range to.
    BadRange(String),
    /// [`draw_stacked`] was given no chart.
    NoCharts,
    /// plotters failed while drawing or writing the file.
    Draw(String),
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlotError::UnsupportedFormat(p) => write!(
                f,
                "cannot plot to '{}': the file name must end in .png or .svg",
                p.display()
            ),
            PlotError::Font { path, reason } => write!(
                f,
                "cannot load the plot font '{}' ({reason}): install the Debian package \
                 fonts-dejavu-core, or set {FONT_ENV} to a TrueType font file",
                path.display()
            ),
            PlotError::BadRange(why) => write!(f, "cannot plot: {why}"),
            PlotError::NoCharts => write!(f, "cannot plot: no chart to draw"),
            PlotError::Draw(why) => write!(f, "plotting failed: {why}"),
        }
    }
}

impl std::error::Error for PlotError {}

impl From<PlotError> for String {
    fn from(e: PlotError) -> String {
        e.to_string()
    }
}

/// Draw one chart to `path` (`.png` or `.svg`, [`SIZE`] pixels).
pub fn draw(chart: &Chart, path: &Path) -> Result<(), PlotError> {
    draw_panels(std::slice::from_ref(chart), path, SIZE)
}

/// Draw several charts stacked top to bottom in one image (`.png` or `.svg`,
/// [`PANEL_HEIGHT`] pixels per panel), e.g. buffered time above transport
/// delay as in the thesis's Fig. 5.4–5.16.
pub fn draw_stacked(charts: &[Chart], path: &Path) -> Result<(), PlotError> {
    let n = u32::try_from(charts.len()).unwrap_or(u32::MAX);
    draw_panels(charts, path, (SIZE.0, PANEL_HEIGHT.saturating_mul(n)))
}

enum Format {
    Png,
    Svg,
}

fn format_of(path: &Path) -> Result<Format, PlotError> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .as_deref()
    {
        Some("png") => Ok(Format::Png),
        Some("svg") => Ok(Format::Svg),
        _ => Err(PlotError::UnsupportedFormat(path.to_path_buf())),
    }
}

fn draw_panels(charts: &[Chart], path: &Path, size: (u32, u32)) -> Result<(), PlotError> {
    if charts.is_empty() {
        return Err(PlotError::NoCharts);
    }
    let format = format_of(path)?;
    // Resolve every range before creating the file: a bad chart leaves no
    // half-written image behind.
    let ranges = charts
        .iter()
        .map(resolve_ranges)
        .collect::<Result<Vec<_>, _>>()?;
    ensure_font()?;
    match format {
        Format::Png => {
            let root = BitMapBackend::new(path, size).into_drawing_area();
            render_all(&root, charts, &ranges)
        }
        Format::Svg => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            render_all(&root, charts, &ranges)
        }
    }
}

fn render_all<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    charts: &[Chart],
    ranges: &[Ranges],
) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(draw_err)?;
    let panels = root.split_evenly((charts.len(), 1));
    for ((panel, chart), r) in panels.iter().zip(charts).zip(ranges) {
        render(panel, chart, r)?;
    }
    root.present().map_err(draw_err)
}

fn draw_err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// The font, loaded and registered with plotters once per process.
fn ensure_font() -> Result<(), PlotError> {
    static FONT: OnceLock<Result<(), PlotError>> = OnceLock::new();
    FONT.get_or_init(|| {
        let path = std::env::var_os(FONT_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(FONT_PATH));
        let bytes = std::fs::read(&path).map_err(|e| PlotError::Font {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        // plotters keeps `&'static` font data; this runs once per process.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).map_err(|_| {
            PlotError::Font {
                path,
                reason: "not a TrueType/OpenType font".into(),
            }
        })
    })
    .clone()
}

/// Axis ranges of one chart: `((x0, x1), (y0, y1))`, each non-empty and finite.
type Ranges = ((f64, f64), (f64, f64));

fn resolve_ranges(chart: &Chart) -> Result<Ranges, PlotError> {
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let data: Vec<(f64, f64)> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .chain(chart.regions.iter().flat_map(|r| r.polygon.iter()))
        .filter(finite)
        .copied()
        .collect();
    let x = match chart.x_range {
        Some(r) => check_range("x", r)?,
        None => fit("x", data.iter().map(|p| p.0))?,
    };
    let y = match chart.y_range {
        Some(r) => check_range("y", r)?,
        None => fit(
            "y",
            data.iter()
                .map(|p| p.1)
                .chain(chart.hlines.iter().map(|h| h.y).filter(|y| y.is_finite())),
        )?,
    };
    Ok((x, y))
}

fn check_range(axis: &str, (lo, hi): (f64, f64)) -> Result<(f64, f64), PlotError> {
    if lo.is_finite() && hi.is_finite() && lo < hi {
        Ok((lo, hi))
    } else {
        Err(PlotError::BadRange(format!(
            "the {axis} range {lo}..{hi} is empty, reversed or not finite"
        )))
    }
}

fn fit(axis: &str, values: impl Iterator<Item = f64>) -> Result<(f64, f64), PlotError> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !(lo.is_finite() && hi.is_finite()) {
        return Err(PlotError::BadRange(format!(
            "no data to fit the {axis} range to; give the range explicitly"
        )));
    }
    let span = hi - lo;
    let pad = if span > 0.0 {
        span * 0.03
    } else {
        (lo.abs() * 0.1).max(1.0)
    };
    Ok((lo - pad, hi + pad))
}

/// Tick labels without a trail of zeros: `20`, `2.5`, `0.001`.
/// Decimals that tell a tenth of `span` apart, at least 3 (a narrow range
/// such as SSIM's 0.9990-0.9999 needs more).
fn decimals_for(span: f64) -> usize {
    if span > 0.0 && span.is_finite() {
        ((-(span / 10.0).log10()).ceil().max(0.0) as usize).clamp(3, 8)
    } else {
        3
    }
}

fn tick_to(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

fn render<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
    &((x0, x1), (y0, y1)): &Ranges,
) -> Result<(), PlotError> {
    let mut ctx = ChartBuilder::on(area)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(draw_err)?;
    ctx.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .x_label_formatter(&|v| tick_to(*v, decimals_for(x1 - x0)))
        .y_label_formatter(&|v| tick_to(*v, decimals_for(y1 - y0)))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(draw_err)?;
    let bounds = Bounds { x0, x1, y0, y1 };
    let mut legend = false;

    for r in &chart.regions {
        let clipped = bounds.clip_polygon(&r.polygon);
        let opacity = if r.opacity.is_finite() {
            r.opacity.clamp(0.0, 1.0)
        } else {
            1.0
        };
        let color = r.fill.rgb().mix(opacity);
        let style = color.filled();
        let shapes: Vec<Polygon<(f64, f64)>> = if clipped.len() >= 3 {
            vec![Polygon::new(clipped, style)]
        } else {
            Vec::new()
        };
        let ann = ctx.draw_series(shapes).map_err(draw_err)?;
        if !r.label.is_empty() {
            legend = true;
            ann.label(r.label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 16, y + 6)], style));
        }
    }

    for h in &chart.hlines {
        let color = h.color.rgb();
        let path = if h.y.is_finite() && h.y >= y0 && h.y <= y1 {
            vec![PathElement::new(
                vec![(x0, h.y), (x1, h.y)],
                color.stroke_width(1),
            )]
        } else {
            Vec::new()
        };
        let ann = ctx.draw_series(path).map_err(draw_err)?;
        if !h.label.is_empty() {
            legend = true;
            ann.label(h.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
        }
    }

    for s in &chart.series {
        let color = s.color.rgb();
        let ann = match s.style {
            Style::Line => {
                let paths: Vec<PathElement<(f64, f64)>> = bounds
                    .clip_polyline(&s.points)
                    .into_iter()
                    .map(|p| PathElement::new(p, color.stroke_width(2)))
                    .collect();
                ctx.draw_series(paths).map_err(draw_err)?
            }
            Style::Points => ctx
                .draw_series(
                    s.points
                        .iter()
                        .filter(|p| bounds.contains(**p))
                        .map(|&p| Circle::new(p, 2, color.filled())),
                )
                .map_err(draw_err)?,
            Style::Crosses => ctx
                .draw_series(
                    s.points
                        .iter()
                        .filter(|p| bounds.contains(**p))
                        .map(|&p| Cross::new(p, 4, color.stroke_width(2))),
                )
                .map_err(draw_err)?,
        };
        if !s.name.is_empty() {
            legend = true;
            let style = s.style;
            ann.label(s.name.as_str()).legend(
                move |(x, y)| -> DynElement<'static, DB, (i32, i32)> {
                    match style {
                        Style::Line => {
                            PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                                .into_dyn()
                        }
                        Style::Points => Circle::new((x + 8, y), 3, color.filled()).into_dyn(),
                        Style::Crosses => {
                            Cross::new((x + 8, y), 4, color.stroke_width(2)).into_dyn()
                        }
                    }
                },
            );
        }
    }

    if legend {
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(draw_err)?;
    }
    Ok(())
}

/// The visible rectangle in data coordinates, for clipping.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

impl Bounds {
    fn contains(&self, (x, y): (f64, f64)) -> bool {
        x >= self.x0 && x <= self.x1 && y >= self.y0 && y <= self.y1
    }

    /// Sutherland–Hodgman: clip a polygon against each edge of the rectangle.
    fn clip_polygon(&self, poly: &[(f64, f64)]) -> Vec<(f64, f64)> {
        let mut out: Vec<(f64, f64)> = poly
            .iter()
            .copied()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        // Each edge: (inside test, intersection of segment a→b with the edge).
        type Inside = fn(&Bounds, (f64, f64)) -> bool;
        type Cut = fn(&Bounds, (f64, f64), (f64, f64)) -> (f64, f64);
        let edges: [(Inside, Cut); 4] = [
            (|b, p| p.0 >= b.x0, |b, p, q| cut_x(p, q, b.x0)),
            (|b, p| p.0 <= b.x1, |b, p, q| cut_x(p, q, b.x1)),
            (|b, p| p.1 >= b.y0, |b, p, q| cut_y(p, q, b.y0)),
            (|b, p| p.1 <= b.y1, |b, p, q| cut_y(p, q, b.y1)),
        ];
        for (inside, cut) in edges {
            if out.is_empty() {
                break;
            }
            let input = std::mem::take(&mut out);
            let mut prev = input[input.len() - 1];
            for &cur in &input {
                match (inside(self, prev), inside(self, cur)) {
                    (true, true) => out.push(cur),
                    (true, false) => out.push(cut(self, prev, cur)),
                    (false, true) => {
                        out.push(cut(self, prev, cur));
                        out.push(cur);
                    }
                    (false, false) => {}
                }
                prev = cur;
            }
        }
        out
    }

    /// Liang–Barsky on each segment; returns the visible pieces as polylines.
    fn clip_polyline(&self, pts: &[(f64, f64)]) -> Vec<Vec<(f64, f64)>> {
        let mut pieces: Vec<Vec<(f64, f64)>> = Vec::new();
        let mut current: Vec<(f64, f64)> = Vec::new();
        let finite: Vec<(f64, f64)> = pts
            .iter()
            .copied()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
            .collect();
        if finite.len() == 1 && self.contains(finite[0]) {
            return vec![finite];
        }
        for w in finite.windows(2) {
            match self.clip_segment(w[0], w[1]) {
                Some((a, b)) => {
                    if current.last() != Some(&a) {
                        if current.len() >= 2 {
                            pieces.push(std::mem::take(&mut current));
                        }
                        current.clear();
                        current.push(a);
                    }
                    current.push(b);
                }
                None => {
                    if current.len() >= 2 {
                        pieces.push(std::mem::take(&mut current));
                    }
                    current.clear();
                }
            }
        }
        if current.len() >= 2 {
            pieces.push(current);
        }
        pieces
    }

    fn clip_segment(&self, a: (f64, f64), b: (f64, f64)) -> Option<((f64, f64), (f64, f64))> {
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let (mut t0, mut t1) = (0.0f64, 1.0f64);
        for (p, q) in [
            (-dx, a.0 - self.x0),
            (dx, self.x1 - a.0),
            (-dy, a.1 - self.y0),
            (dy, self.y1 - a.1),
        ] {
            if p == 0.0 {
                if q < 0.0 {
                    return None;
                }
            } else {
                let t = q / p;
                if p < 0.0 {
                    t0 = t0.max(t);
                } else {
                    t1 = t1.min(t);
                }
            }
        }
        if t0 > t1 {
            return None;
        }
        let at = |t: f64| {
            if t == 0.0 {
                a
            } else if t == 1.0 {
                b
            } else {
                (a.0 + t * dx, a.1 + t * dy)
            }
        };
        Some((at(t0), at(t1)))
    }
}

fn cut_x(p: (f64, f64), q: (f64, f64), x: f64) -> (f64, f64) {
    let t = (x - p.0) / (q.0 - p.0);
    (x, p.1 + t * (q.1 - p.1))
}

fn cut_y(p: (f64, f64), q: (f64, f64), y: f64) -> (f64, f64) {
    let t = (y - p.1) / (q.1 - p.1);
    (p.0 + t * (q.0 - p.0), y)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a];

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hollywood-plot-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn sample() -> Chart {
        Chart {
            title: "sample".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x_range: Some((0.0, 50.0)),
            y_range: None,
            series: vec![
                Series::new(
                    "line",
                    (0..50)
                        .map(|i| (i as f64, (i as f64 / 5.0).sin()))
                        .collect(),
                    Style::Line,
                    Rgb::BLUE,
                ),
                Series::new(
                    "lost",
                    vec![(10.0, -0.5), (30.0, 0.5)],
                    Style::Crosses,
                    Rgb::RED,
                ),
                Series::new("", vec![(20.0, 0.0)], Style::Points, Rgb::BLACK),
            ],
            hlines: vec![HLine {
                y: 0.0,
                color: Rgb::GREY,
                label: String::new(),
            }],
            regions: vec![Region {
                label: "region".into(),
                // Sticks out of the fixed x range on the left: clipped at x = 0.
                polygon: vec![(-100.0, -1.0), (25.0, -1.0), (25.0, 1.0)],
                fill: Rgb::GREEN,
                opacity: 0.3,
            }],
        }
    }

    #[test]
    fn draws_png_and_svg() {
        let dir = temp_dir("formats");
        let png = dir.join("a.png");
        let svg = dir.join("a.svg");
        draw(&sample(), &png).unwrap();
        draw_stacked(&[sample(), sample()], &svg).unwrap();
        let png_bytes = std::fs::read(&png).unwrap();
        assert!(png_bytes.len() > 1000, "PNG is {} bytes", png_bytes.len());
        assert_eq!(png_bytes[..8], PNG_SIGNATURE);
        let svg_text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            svg_text.starts_with("<svg"),
            "{}",
            &svg_text[..40.min(svg_text.len())]
        );
        assert!(
            svg_text.contains("sample"),
            "title text missing from the SVG"
        );
        assert!(svg_text.contains("<polygon"), "region missing from the SVG");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn stacked_png_is_taller_than_one_panel() {
        let dir = temp_dir("stacked");
        let png = dir.join("s.png");
        draw_stacked(&[sample(), sample(), sample()], &png).unwrap();
        let b = std::fs::read(&png).unwrap();
        // IHDR: width and height are big-endian u32s at bytes 16..24.
        let w = u32::from_be_bytes(b[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(b[20..24].try_into().unwrap());
        assert_eq!((w, h), (SIZE.0, 3 * PANEL_HEIGHT));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rejects_bad_input_without_writing() {
        let dir = temp_dir("bad");
        let p = dir.join("a.pdf");
        assert_eq!(
            draw(&sample(), &p),
            Err(PlotError::UnsupportedFormat(p.clone()))
        );
        assert_eq!(
            draw_stacked(&[], &dir.join("a.png")),
            Err(PlotError::NoCharts)
        );
        let mut c = sample();
        c.x_range = Some((5.0, 5.0));
        let png = dir.join("bad.png");
        assert!(matches!(draw(&c, &png), Err(PlotError::BadRange(_))));
        assert!(!png.exists());
        let empty = Chart::default();
        assert!(matches!(draw(&empty, &png), Err(PlotError::BadRange(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn clipping() {
        let b = Bounds {
            x0: 0.0,
            x1: 10.0,
            y0: 0.0,
            y1: 10.0,
        };
        // A triangle half outside on the left is cut at x = 0.
        let p = b.clip_polygon(&[(-10.0, 0.0), (10.0, 0.0), (10.0, 10.0)]);
        assert!(p.iter().all(|&q| b.contains(q)), "{p:?}");
        assert!(p.contains(&(0.0, 5.0)), "{p:?}");
        // Entirely outside: nothing.
        assert!(b
            .clip_polygon(&[(20.0, 0.0), (30.0, 0.0), (30.0, 5.0)])
            .is_empty());
        // A line that leaves and re-enters becomes two pieces.
        let pieces = b.clip_polyline(&[(1.0, 1.0), (1.0, 20.0), (5.0, 20.0), (5.0, 5.0)]);
        assert_eq!(
            pieces,
            vec![vec![(1.0, 1.0), (1.0, 10.0)], vec![(5.0, 10.0), (5.0, 5.0)]]
        );
        // A line inside stays one piece with all its points.
        let inside = b.clip_polyline(&[(1.0, 1.0), (2.0, 2.0), (3.0, 1.0)]);
        assert_eq!(inside, vec![vec![(1.0, 1.0), (2.0, 2.0), (3.0, 1.0)]]);
    }

    #[test]
    fn ticks_are_short() {
        let tick = |v: &f64| tick_to(*v, 3);
        assert_eq!(tick(&20.0), "20");
        assert_eq!(tick(&2.5), "2.5");
        assert_eq!(tick(&-0.0001), "0");
        assert_eq!(tick(&13333.333), "13333.333");
        assert_eq!(tick_to(0.9997, decimals_for(0.001)), "0.9997");
        assert_eq!(decimals_for(100.0), 3);
    }
}
