//! The lab's emulator as a background process: what `hollywood lab up`
//! starts and `lab down` stops.
//!
//! `lab up` runs `hollywood netem run --lab NAME …` detached from the shell
//! (`setsid`), keeping its pid file, log and counters in one directory per
//! lab ([`RunDir`], `/run/hollywood/NAME/`). A process found through a pid
//! file is only ever signalled when its command line is still that lab's
//! emulator (pids are reused).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where `lab up` keeps each lab's emulator pid file, log and counters.
pub const RUN_DIR: &str = "/run/hollywood";

/// The directory of one lab's emulator: `netem.pid`, `netem.log`,
/// `stats.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunDir {
    name: String,
    dir: PathBuf,
}

impl RunDir {
    /// Lab `name`'s directory under [`RUN_DIR`].
    pub fn of(name: &str) -> RunDir {
        RunDir::at(name, Path::new(RUN_DIR).join(name))
    }

    /// Lab `name`'s directory at `dir` (tests use a temporary one).
    pub fn at(name: &str, dir: impl Into<PathBuf>) -> RunDir {
        RunDir {
            name: name.to_owned(),
            dir: dir.into(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The emulator's counters, rewritten while it runs.
    pub fn stats_file(&self) -> PathBuf {
        self.dir.join("stats.json")
    }

    /// The emulator's standard output and error.
    pub fn log_file(&self) -> PathBuf {
        self.dir.join("netem.log")
    }

    fn pid_file(&self) -> PathBuf {
        self.dir.join("netem.pid")
    }

    /// The pid of this lab's emulator if that process is alive and is ours
    /// (its command line is `… netem run --lab NAME …`).
    pub fn emulator_pid(&self) -> Option<u32> {
        let text = std::fs::read_to_string(self.pid_file()).ok()?;
        let pid: u32 = text.trim().parse().ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let ours = args
            .windows(2)
            .any(|w| w == [b"netem".as_slice(), b"run".as_slice()])
            && args
                .windows(2)
                .any(|w| w == [b"--lab".as_slice(), self.name.as_bytes()]);
        (ours && proc_alive(pid)).then_some(pid)
    }

    /// Stop this lab's emulator: SIGTERM, then SIGKILL after 5 s. `None`
    /// when none was running.
    pub fn stop_emulator(&self) -> Result<Option<u32>, String> {
        let Some(pid) = self.emulator_pid() else {
            return Ok(None);
        };
        signal(pid, "-TERM");
        let deadline = Instant::now() + Duration::from_secs(5);
        while proc_alive(pid) {
            if Instant::now() > deadline {
                signal(pid, "-KILL");
                std::thread::sleep(Duration::from_millis(100));
                if proc_alive(pid) {
                    return Err(format!("emulator process {pid} does not die"));
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(Some(pid))
    }

    /// Start `program args…` detached from the terminal (`setsid`), its
    /// output in [`RunDir::log_file`] and its pid in the pid file, and wait
    /// until it has written [`RunDir::stats_file`] (at most 10 s).
    /// `interrupted` is asked while waiting: an `Err` from it stops the
    /// child and is returned. On any error the child is killed and the
    /// directory removed.
    pub fn start_emulator(
        &self,
        program: &Path,
        args: &[OsString],
        mut interrupted: impl FnMut() -> Result<(), String>,
    ) -> Result<u32, String> {
        let cleanup = |e: String| {
            let _ = std::fs::remove_dir_all(&self.dir);
            e
        };
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let stats_file = self.stats_file();
        let _ = std::fs::remove_file(&stats_file);
        let log_path = self.log_file();
        let log = std::fs::File::create(&log_path)
            .map_err(|e| cleanup(format!("cannot create {}: {e}", log_path.display())))?;
        let log2 = log.try_clone().map_err(|e| cleanup(e.to_string()))?;
        let child = Command::new("setsid")
            .arg(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2))
            .spawn()
            .map_err(|e| cleanup(format!("cannot start the emulator with setsid: {e}")))?;
        let pid = child.id();
        let mut guard = ChildGuard(Some(child));
        std::fs::write(self.pid_file(), format!("{pid}\n"))
            .map_err(|e| cleanup(format!("cannot write the pid file: {e}")))?;

        // Wait until the emulator has written its first counters.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if stats_file.exists() {
                break;
            }
            let exited = guard.0.as_mut().and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                return Err(cleanup(format!(
                    "the emulator exited ({status}) during start-up:\n{}",
                    log.trim()
                )));
            }
            if Instant::now() > deadline {
                return Err(cleanup(format!(
                    "the emulator did not start within 10 s (log: {})",
                    log_path.display()
                )));
            }
            interrupted().map_err(cleanup)?;
            std::thread::sleep(Duration::from_millis(20));
        }
        interrupted().map_err(cleanup)?;
        // Success: the emulator outlives this process.
        let _ = guard.0.take();
        Ok(pid)
    }
}

/// A spawned child killed on drop unless released.
struct ChildGuard(Option<Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Whether process `pid` is alive (a zombie, state Z, has exited; only its
/// table entry remains).
pub fn proc_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(tag: &str) -> PathBuf {
        std::env::temp_dir().join(format!("hollywood-daemon-{tag}-{}", std::process::id()))
    }

    /// A stand-in emulator: a shell whose command line reads
    /// `sh -c … netem run --lab NAME`, writing the counters file at once.
    fn fake_args(stats: &Path, name: &str) -> Vec<OsString> {
        [
            "-c",
            &format!("echo '{{}}' > {}; sleep 30; true", stats.display()),
            "netem",
            "run",
            "--lab",
            name,
        ]
        .iter()
        .map(OsString::from)
        .collect()
    }

    #[test]
    fn an_emulator_is_started_found_by_its_pid_file_and_stopped() {
        let dir = tmp("cycle");
        let rd = RunDir::at("cycle", &dir);
        let pid = rd
            .start_emulator(
                Path::new("sh"),
                &fake_args(&rd.stats_file(), "cycle"),
                || Ok(()),
            )
            .expect("starts");
        assert_eq!(rd.emulator_pid(), Some(pid));
        // Another lab's name does not match this process.
        let other = RunDir::at("other", &dir);
        assert_eq!(other.emulator_pid(), None);
        assert_eq!(rd.stop_emulator().unwrap(), Some(pid));
        assert!(!proc_alive(pid));
        assert_eq!(rd.emulator_pid(), None);
        assert_eq!(rd.stop_emulator().unwrap(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_process_that_is_not_the_labs_emulator_is_never_signalled() {
        let dir = tmp("foreign");
        std::fs::create_dir_all(&dir).unwrap();
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        std::fs::write(dir.join("netem.pid"), format!("{}\n", sleeper.id())).unwrap();
        let rd = RunDir::at("foreign", &dir);
        assert_eq!(rd.emulator_pid(), None);
        assert_eq!(rd.stop_emulator().unwrap(), None);
        assert!(proc_alive(sleeper.id()), "a foreign process was signalled");
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_start_kills_the_child_and_removes_the_directory() {
        let dir = tmp("fail");
        let rd = RunDir::at("fail", &dir);
        let args: Vec<OsString> = ["-c", "echo broken >&2; exit 3"]
            .iter()
            .map(OsString::from)
            .collect();
        let e = rd
            .start_emulator(Path::new("sh"), &args, || Ok(()))
            .unwrap_err();
        assert!(e.contains("exited") && e.contains("broken"), "{e}");
        assert!(!dir.exists());
        // An interruption while waiting stops it too.
        let args: Vec<OsString> = ["-c", "sleep 30"].iter().map(OsString::from).collect();
        let e = rd
            .start_emulator(Path::new("sh"), &args, || Err("interrupted".into()))
            .unwrap_err();
        assert_eq!(e, "interrupted");
        assert!(!dir.exists());
    }
}
