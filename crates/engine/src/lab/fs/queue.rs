//! A lab MTA's queue on LazyFS (`--fault power-loss`): the queue directory is a LazyFS
//! mount, so that a power cut drops what the MTA had not fsynced, while what LazyFS
//! cannot hold — FIFOs and Unix sockets (it has no `mknod`), and the pid files beside
//! them — lives on a plain directory that the queue names by symbolic links. Every queue
//! subdirectory the MTA renames between stays on the one LazyFS mount (a rename across
//! file systems fails with EXDEV). The MTA must run unchrooted: the links are absolute.

use std::path::{Path, PathBuf};

use super::lazyfs::LazyFs;

/// LazyFS's cache for a queue: what is not fsynced is held here, never evicted, so the
/// unsynced part of a queue may not grow past it (a queue's files are fsynced as they
/// are accepted, so only what is in flight counts).
const CACHE_BYTES: u64 = 512 << 20;

/// A queue directory on LazyFS, with its plain directory for sockets; unmounted on drop.
#[derive(Debug)]
pub struct LazyQueue {
    fs: LazyFs,
    plain: PathBuf,
}

impl LazyQueue {
    /// Mounts LazyFS over `dir/name` (backed by `dir/name.disk`, its state in
    /// `dir/name.lazyfs`) and links each of `local` (e.g. `public`) in it to a directory
    /// of that name in `dir/name.local`, made with the owner and mode given.
    pub fn make(dir: &Path, name: &str, local: &[(&str, &str, u32)]) -> Result<LazyQueue, String> {
        let mount = dir.join(name);
        let fs = LazyFs::start(
            &mount,
            &dir.join(format!("{name}.disk")),
            &dir.join(format!("{name}.lazyfs")),
            CACHE_BYTES,
        )?;
        let q = LazyQueue {
            fs,
            plain: dir.join(format!("{name}.local")),
        };
        for (sub, owner, mode) in local {
            let d = q.plain.join(sub);
            std::fs::create_dir_all(&d)
                .map_err(|e| format!("cannot create the queue's socket directory: {e}"))?;
            crate::lab::host::chown_to(&d, owner).map_err(|e| e.to_string())?;
            crate::lab::host::set_mode(&d, *mode);
            let link = mount.join(sub);
            std::os::unix::fs::symlink(&d, &link).map_err(|e| {
                format!("cannot link the queue's socket directory into LazyFS: {e}")
            })?;
        }
        Ok(q)
    }

    /// The queue directory (the LazyFS mount).
    pub fn path(&self) -> &Path {
        self.fs.mount_point()
    }

    /// The power cut: drops every write to the queue that was not fsynced.
    pub fn cut_power(&mut self) -> Result<(), String> {
        self.fs.clear_cache()
    }

    /// What a power cut now would lose.
    pub fn unsynced(&mut self) -> Result<super::lazyfs::Unsynced, String> {
        self.fs.unsynced()
    }

    /// Unmounts LazyFS and removes the plain directory (idempotent; the MTA must be
    /// stopped first).
    pub fn remove(&mut self) {
        self.fs.stop();
        let _ = std::fs::remove_dir_all(&self.plain);
    }
}

impl Drop for LazyQueue {
    fn drop(&mut self) {
        self.remove();
    }
}
