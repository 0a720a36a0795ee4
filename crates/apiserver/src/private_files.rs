//! Files that hold secrets: the data directory (whose log holds Secrets in plain text, as
//! etcd's does) and kubeconfigs with tokens. They are created readable by their owner
//! only, as etcd creates its data directory (0700) and kubectl its kubeconfig (0600).

use std::io::{self, Write};
use std::path::Path;

/// Creates `dir` (and its parents) for the owner only (0700 on Unix). An existing
/// directory is left as it is, with a warning when others may read it (etcd does the
/// same with its data directory).
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let mode = std::fs::metadata(dir)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                dir = %dir.display(),
                "the data directory is readable by others (mode {mode:o}); it holds Secrets, 0700 is recommended"
            );
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Options that create a file for the owner only (0600 on Unix).
pub(crate) fn private_file_options() -> std::fs::OpenOptions {
    #[allow(unused_mut)]
    let mut opts = std::fs::OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts
}

/// Writes `contents` to `path` readable by its owner only (0600 on Unix), whatever was
/// there: the bytes go to a new file beside it, which is then renamed over `path`, so an
/// existing file's wider mode is not kept and a symlink at `path` is replaced, never
/// followed. Parent directories are created as needed.
pub fn write_private(path: &Path, contents: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a path without a file name"))?;
    let tmp = dir.join(format!(
        ".{}.{:016x}.tmp",
        name.to_string_lossy(),
        rand::random::<u64>()
    ));
    let written = (|| {
        let mut f = private_file_options()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)] // test code
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn private_files_are_owner_only_and_symlinks_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/kubeconfig");
        write_private(&path, b"token: a").unwrap();
        assert_eq!(mode(&path), 0o600);
        // An existing, world-readable file: replaced by an owner-only one.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&path, b"token: b").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"token: b");
        // A symlink at the path: replaced; its target is untouched.
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_private(&link, b"token: c").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(
            !std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(mode(&link), 0o600);
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(dir.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["kubeconfig"]);

        let data = dir.path().join("data/dir");
        create_private_dir(&data).unwrap();
        assert_eq!(mode(&data), 0o700);
    }
}
