//! The small file that holds what must survive beside the log: the vote and
//! the last purged log id, one file per Raft group. It changes rarely, so it
//! is rewritten whole, atomically: write a temp file, fsync, rename, fsync
//! the directory. The write and its fsync go through the `Io` seam, so the
//! simulation's power loss covers votes too.
//!
//! Group 0 keeps the name a single-group log has always used (`raft-meta`);
//! group `g > 0` uses `raft-meta-{g}` in the same directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use regina_storage::{Io, RealIo};

use serde::{Deserialize, Serialize};

use crate::types::{LogId, Vote};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub vote: Option<Vote>,
    pub last_purged: Option<LogId>,
}

const NAME: &str = "raft-meta";

pub struct MetaFile {
    path: PathBuf,
    dir: PathBuf,
    io: Arc<dyn Io>,
}

impl MetaFile {
    /// Group 0's file.
    pub fn new(dir: &Path) -> Self {
        Self::for_group(dir, 0)
    }

    pub fn for_group(dir: &Path, group: u16) -> Self {
        let name = if group == 0 { NAME.to_string() } else { format!("{NAME}-{group}") };
        MetaFile { path: dir.join(name), dir: dir.to_path_buf(), io: Arc::new(RealIo) }
    }

    /// The same file, written and synced through `io`.
    pub fn with_io(self, io: Arc<dyn Io>) -> Self {
        MetaFile { io, ..self }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The groups above 0 that have a meta file in `dir`, ascending. Leftover
    /// temp files do not count: their rename never happened.
    pub fn groups_in(dir: &Path) -> std::io::Result<Vec<u16>> {
        let mut groups = Vec::new();
        for entry in fs::read_dir(dir)? {
            let name = entry?.file_name();
            let Some(suffix) = name.to_str().and_then(|n| n.strip_prefix(NAME)?.strip_prefix('-')) else {
                continue;
            };
            // Only the canonical spelling is one of ours ("07" is not).
            if let Some(g) = suffix.parse::<u16>().ok().filter(|g| *g > 0 && g.to_string() == suffix) {
                groups.push(g);
            }
        }
        groups.sort_unstable();
        Ok(groups)
    }

    pub fn load(&self) -> std::io::Result<Meta> {
        match fs::read(&self.path) {
            Ok(b) => {
                let (crc, body) = b.split_at(4.min(b.len()));
                let stored = <[u8; 4]>::try_from(crc).ok().map(u32::from_le_bytes);
                if stored != Some(crc32(body)) {
                    return Err(std::io::Error::other(format!(
                        "{} is corrupt (checksum mismatch)",
                        self.path.display()
                    )));
                }
                bincode::deserialize(body).map_err(std::io::Error::other)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Meta::default()),
            Err(e) => Err(e),
        }
    }

    pub fn store(&self, meta: &Meta) -> std::io::Result<()> {
        let body = bincode::serialize(meta).map_err(std::io::Error::other)?;
        let tmp = self.path.with_extension("tmp");
        // Read-write: a disk that keeps what a write replaced (the
        // simulation's) reads before it writes.
        let f = fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&tmp)?;
        let mut bytes = crc32(&body).to_le_bytes().to_vec();
        bytes.extend_from_slice(&body);
        self.io.write_at(&f, &bytes, 0)?;
        self.io.sync_data(&f)?;
        fs::rename(&tmp, &self.path)?;
        fs::File::open(&self.dir)?.sync_all()
    }
}

fn crc32(b: &[u8]) -> u32 {
    crc32c::crc32c(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    #[test]
    fn each_group_has_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(MetaFile::new(dir.path()).path(), dir.path().join("raft-meta"));
        assert_eq!(MetaFile::for_group(dir.path(), 0).path(), dir.path().join("raft-meta"));
        assert_eq!(MetaFile::for_group(dir.path(), 12).path(), dir.path().join("raft-meta-12"));

        let purged = LogId::new(CommittedLeaderId::new(2, 1), 5);
        let meta = |term| Meta { vote: Some(Vote::new(term, 1)), last_purged: Some(purged) };
        for g in [0, 3, 12] {
            MetaFile::for_group(dir.path(), g).store(&meta(u64::from(g))).unwrap();
        }
        for g in [0, 3, 12] {
            assert_eq!(MetaFile::for_group(dir.path(), g).load().unwrap(), meta(u64::from(g)));
        }
        assert_eq!(MetaFile::for_group(dir.path(), 4).load().unwrap(), Meta::default());

        for stray in ["raft-meta-3.tmp", "raft-meta-07", "raft-meta-0", "raft-meta-x", "raft-meta-70000"] {
            fs::write(dir.path().join(stray), b"").unwrap();
        }
        assert_eq!(MetaFile::groups_in(dir.path()).unwrap(), vec![3, 12]);
    }
}
