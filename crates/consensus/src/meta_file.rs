//! The small file that holds what must survive beside the log: the vote and
//! the last purged log id. It changes rarely, so it is rewritten whole,
//! atomically: write a temp file, fsync, rename, fsync the directory.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::types::{LogId, Vote};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    pub vote: Option<Vote>,
    pub last_purged: Option<LogId>,
}

pub struct MetaFile {
    path: PathBuf,
    dir: PathBuf,
}

impl MetaFile {
    pub fn new(dir: &Path) -> Self {
        MetaFile { path: dir.join("raft-meta"), dir: dir.to_path_buf() }
    }

    pub fn load(&self) -> std::io::Result<Meta> {
        match fs::read(&self.path) {
            Ok(b) => {
                let (crc, body) = b.split_at(4.min(b.len()));
                if crc.len() != 4 || u32::from_le_bytes(crc.try_into().unwrap()) != crc32(body) {
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
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&crc32(&body).to_le_bytes())?;
        f.write_all(&body)?;
        f.sync_all()?;
        fs::rename(&tmp, &self.path)?;
        fs::File::open(&self.dir)?.sync_all()
    }
}

fn crc32(b: &[u8]) -> u32 {
    crc32c::crc32c(b)
}
