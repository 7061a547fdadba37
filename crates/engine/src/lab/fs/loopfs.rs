//! A small real file system: an ext4 image of a given size on a loop device, mounted over
//! a directory — a disk that fills up for real (ENOSPC from the kernel, not a mock), the
//! `disk-full` fault of issue 42. A ballast file takes its space on demand ([`LoopFs::fill`])
//! and gives it back ([`LoopFs::free`]). Every command has a deadline; the mount and the
//! loop device are undone on drop.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::{mounted, poll_until, run_ok, succeeds};

/// How long mkfs, mount, umount and losetup each get.
const LIMIT: Duration = Duration::from_secs(30);
/// The smallest image mkfs.ext4 makes a usable file system of here (with a journal).
pub const MIN_SIZE: u64 = 4 << 20;
/// The ballast's name in the file system's top directory.
const BALLAST: &str = ".mailbench-ballast";

/// A mounted ext4 image.
#[derive(Debug)]
pub struct LoopFs {
    image: PathBuf,
    size: u64,
    mount: PathBuf,
    mounted: bool,
}

impl LoopFs {
    /// Makes `image` an ext4 file system of `size` bytes (4 KiB blocks, as on a disk, where
    /// mkfs would pick 1 KiB for a small one; no blocks reserved for root: the lab's servers
    /// run as root or users alike, and all of it fills) and mounts it over
    /// `mount` (made if missing) through a loop device, which the kernel frees when it is
    /// unmounted (`mount -o loop` sets autoclear).
    pub fn make(image: &Path, mount: &Path, size: u64) -> Result<LoopFs, String> {
        crate::lab::host::check_root("a loop-mounted file system")?;
        if size < MIN_SIZE {
            return Err(format!(
                "a file system of {size} bytes is too small: give at least {} MiB",
                MIN_SIZE >> 20
            ));
        }
        let failed = |what: String| format!("loop file system: {what}");
        std::fs::create_dir_all(mount)
            .map_err(|e| failed(format!("cannot create {}: {e}", mount.display())))?;
        let f = std::fs::File::create(image)
            .map_err(|e| failed(format!("cannot create {}: {e}", image.display())))?;
        f.set_len(size)
            .map_err(|e| failed(format!("cannot size {}: {e}", image.display())))?;
        drop(f);
        run_ok(
            Command::new("mkfs.ext4")
                .args(["-q", "-F", "-m", "0", "-b", "4096"])
                .arg(image),
            LIMIT,
        )
        .map_err(failed)?;
        run_ok(
            Command::new("mount")
                .args(["-t", "ext4", "-o", "loop"])
                .arg(image)
                .arg(mount),
            LIMIT,
        )
        .map_err(failed)?;
        Ok(LoopFs {
            image: image.to_path_buf(),
            size,
            mount: mount.to_path_buf(),
            mounted: true,
        })
    }

    /// Its size in bytes, as made (the image's).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Where it is mounted.
    pub fn mount_point(&self) -> &Path {
        &self.mount
    }

    /// The loop devices backed by its image (one while mounted; none after [`stop`](Self::stop)).
    pub fn devices(&self) -> Vec<String> {
        devices_of(&self.image)
    }

    /// Bytes an unprivileged writer may still use (`statvfs`: `f_bavail × f_frsize`).
    pub fn free_bytes(&self) -> Result<u64, String> {
        use std::os::unix::ffi::OsStrExt;
        let c =
            std::ffi::CString::new(self.mount.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
        #[allow(unsafe_code)]
        // SAFETY: an all-zero statvfs is a valid value (integers only).
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        #[allow(unsafe_code)]
        // SAFETY: `c` is a NUL-terminated path that outlives the call; `st` is a valid
        // out pointer.
        let failed = unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0;
        if failed {
            return Err(format!(
                "statvfs {}: {}",
                self.mount.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(st.f_bavail as u64 * st.f_frsize as u64)
    }

    /// Takes the free space with a ballast file, leaving about `leave` bytes (rounded down
    /// to 4 KiB blocks; 0: the disk is full). With `leave` above 0 the ballast is
    /// allocated at once (fallocate) to the free space less `leave`, so that the disk is
    /// never full meanwhile (the MTA's writes in flight would fail, seen as Postfix's
    /// smtpd finding 0 bytes free mid-fill); with 0, or where fallocate fails, it writes
    /// until the kernel says ENOSPC, then gives `leave` back, and syncs. The ballast's size.
    pub fn fill(&mut self, leave: u64) -> Result<u64, String> {
        let path = self.mount.join(BALLAST);
        if leave > 0
            && let Some(len) = self.allocate(&path, leave)?
        {
            return Ok(len);
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        for chunk in [1 << 20, 4096] {
            let buf = vec![0x5au8; chunk];
            loop {
                match f.write_all(&buf) {
                    Ok(()) => {}
                    Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                    Err(e) => return Err(format!("cannot fill {}: {e}", path.display())),
                }
            }
            // What the full chunk's failed write left partly written stays.
            f.sync_all()
                .map_err(|e| format!("cannot sync {}: {e}", path.display()))?;
        }
        let len = f.metadata().map_err(|e| e.to_string())?.len();
        let keep = len.saturating_sub(leave / 4096 * 4096);
        f.set_len(keep)
            .and_then(|_| f.sync_all())
            .map_err(|e| format!("cannot trim {}: {e}", path.display()))?;
        self.sync()?;
        Ok(keep)
    }

    /// The ballast made at once with fallocate(2), leaving `leave` bytes free; `None`
    /// when the kernel refused (the caller writes it instead).
    fn allocate(&mut self, path: &Path, leave: u64) -> Result<Option<u64>, String> {
        use std::os::fd::AsRawFd;
        let want = self.free_bytes()?.saturating_sub(leave) / 4096 * 4096;
        let f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let Ok(len) = libc::off_t::try_from(want) else {
            return Ok(None);
        };
        #[allow(unsafe_code)]
        // SAFETY: fallocate(2) on a descriptor open for the call's duration.
        let failed = unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len) } != 0;
        if failed {
            let _ = f.set_len(0);
            return Ok(None);
        }
        f.sync_all()
            .map_err(|e| format!("cannot sync {}: {e}", path.display()))?;
        self.sync()?;
        Ok(Some(want))
    }

    /// Removes the ballast and syncs, so that its blocks are free for the next writer.
    pub fn free(&mut self) -> Result<(), String> {
        let path = self.mount.join(BALLAST);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
        }
        self.sync()
    }

    /// syncfs(2) of the file system (freed blocks are reusable once the journal commits).
    fn sync(&self) -> Result<(), String> {
        use std::os::fd::AsRawFd;
        let d = std::fs::File::open(&self.mount).map_err(|e| e.to_string())?;
        #[allow(unsafe_code)]
        // SAFETY: `d` is an open descriptor for the call's duration.
        let failed = unsafe { libc::syncfs(d.as_raw_fd()) } != 0;
        if failed {
            return Err(format!(
                "syncfs {}: {}",
                self.mount.display(),
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    }

    /// Unmounts it (lazily when busy or past the deadline) and detaches any loop device
    /// still backed by its image, then waits (within the deadline) until none is listed:
    /// the kernel frees an autoclear device after the unmount returns, not before (seen
    /// on 6.18: `losetup -a` still listed it right after `umount`). Idempotent; called
    /// on drop. The image file stays.
    pub fn stop(&mut self) {
        if self.mounted && mounted(&self.mount).is_some() {
            let ok = succeeds(Command::new("umount").arg(&self.mount), LIMIT);
            if !ok {
                succeeds(Command::new("umount").arg("-l").arg(&self.mount), LIMIT);
            }
        }
        self.mounted = false;
        poll_until(LIMIT, || {
            let devices = devices_of(&self.image);
            for dev in &devices {
                succeeds(Command::new("losetup").arg("-d").arg(dev), LIMIT);
            }
            devices.is_empty()
        });
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The loop devices backed by `image`, as `losetup -j` lists them.
pub fn devices_of(image: &Path) -> Vec<String> {
    run_ok(
        Command::new("losetup")
            .args(["-n", "-O", "NAME", "-j"])
            .arg(image),
        LIMIT,
    )
    .map(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    })
    .unwrap_or_default()
}
