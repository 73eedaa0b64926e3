//! Opening the log: preparing the directory, recovering, and starting the
//! writer and preparer threads.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{mpsc, Arc, OnceLock};

use parking_lot::{Condvar, Mutex, RwLock};

use super::deleter::Deleter;
use super::preparer::Preparer;
use super::recovery::FoundSegment;
use super::writer::{Active, Spare, Writer};
use super::{recovery, segment, Queue, RecordPos, RecordVisitor, Shared, Wal, WalOptions};
use crate::error::WalError;
use crate::io::Io;

impl Wal {
    /// Opens (or creates) the log in `dir`, recovers it and starts its
    /// writer. Returns every surviving record in log order.
    ///
    /// A torn tail in the last segment holding records is cut and zeroed.
    /// Damage anywhere before that is reported as [`WalError::Corrupt`].
    /// (A log of many segments is better opened with
    /// [`Wal::open_visiting`], which never holds it all in memory.)
    #[allow(clippy::type_complexity)]
    pub fn open(
        dir: impl AsRef<Path>,
        options: WalOptions,
        io: Arc<dyn Io>,
    ) -> Result<(Wal, Vec<(RecordPos, Vec<u8>)>), WalError> {
        let mut records = Vec::new();
        let wal = Wal::open_visiting(dir, options, io, &mut |pos, bytes| {
            records.push((pos, bytes.to_vec()));
            Ok(())
        })?;
        Ok((wal, records))
    }

    /// [`Wal::open`] that hands each surviving record to `visit`, in log
    /// order, instead of returning them: the bytes are only borrowed, from a
    /// buffer reused segment after segment. An `Err` from `visit` stops the
    /// open and comes back as [`WalError::Refused`].
    pub fn open_visiting(
        dir: impl AsRef<Path>,
        options: WalOptions,
        io: Arc<dyn Io>,
        visit: &mut RecordVisitor<'_>,
    ) -> Result<Wal, WalError> {
        options.validate()?;
        let dir = dir.as_ref().to_path_buf();
        prepare_dir(&dir, options.segment_bytes)?;
        let recovered = recovery::recover(&dir, visit)?;
        let layout = Layout::split(recovered.segments, recovered.active, recovered.active_offset).ok_or_else(|| {
            WalError::io(
                format!("recovering {}", dir.display()),
                std::io::Error::other("no wal segment found after creating one"),
            )
        })?;
        let next_seq = layout.spares.back().map_or(layout.active.seq, |s| s.seq) + 1;
        let shared = Arc::new(Shared {
            io,
            options,
            queue: Mutex::new(Queue { pending: VecDeque::new(), shutdown: false }),
            wake: Condvar::new(),
            poison: OnceLock::new(),
            space: Arc::default(),
            bytes_written: AtomicU64::new(0),
            unfinished: Arc::default(),
            current_segment: AtomicU64::new(layout.active.seq),
            segments: RwLock::new(layout.readable),
        });
        Wal::start(dir, shared, layout.active, layout.spares, next_seq)
    }

    fn start(
        dir: PathBuf,
        shared: Arc<Shared>,
        active: Active,
        spares: VecDeque<Spare>,
        next_seq: u64,
    ) -> Result<Wal, WalError> {
        let (tx, rx) = mpsc::sync_channel(0);
        let preparer_stop = Arc::new(AtomicBool::new(false));
        let preparer = Preparer {
            dir: dir.clone(),
            spares,
            next_seq,
            segment_bytes: shared.options.segment_bytes,
            stop: Arc::clone(&preparer_stop),
            space: Arc::clone(&shared.space),
            out: tx,
        };
        let writer = Writer { shared: Arc::clone(&shared), dir: dir.clone(), active, prepared: rx };
        let spawn_err = |e| WalError::io("starting a wal thread", e);
        let deleter = Deleter::start(dir.clone(), Arc::clone(&shared.io)).map_err(spawn_err)?;
        // The writer goes first: if spawning it fails, the preparer (which
        // only exits once the writer drops its receiver) never starts.
        let writer = std::thread::Builder::new()
            .name("regina-wal-writer".into())
            .spawn(move || writer.run())
            .map_err(spawn_err)?;
        let mut wal = Wal { dir, shared, writer: Some(writer), preparer: None, preparer_stop, deleter };
        // On failure `wal` drops here and shuts the writer down cleanly.
        let preparer = std::thread::Builder::new()
            .name("regina-wal-prepare".into())
            .spawn(move || preparer.run())
            .map_err(spawn_err)?;
        wal.preparer = Some(preparer);
        Ok(wal)
    }
}

/// The recovered segments, sorted into their roles.
struct Layout {
    /// The active segment and every one before it.
    readable: BTreeMap<u64, Arc<File>>,
    active: Active,
    /// Empty segments after the active one.
    spares: VecDeque<Spare>,
}

impl Layout {
    fn split(found: Vec<FoundSegment>, active_index: usize, active_offset: u64) -> Option<Layout> {
        let mut found = found.into_iter();
        let mut readable = BTreeMap::new();
        let mut active = None;
        for segment in found.by_ref().take(active_index + 1) {
            let file = Arc::new(segment.file);
            readable.insert(segment.seq, Arc::clone(&file));
            active = Some(Active { seq: segment.seq, file, len: segment.len, offset: active_offset });
        }
        let spares = found.map(|f| Spare { seq: f.seq, file: f.file, len: f.len }).collect();
        Some(Layout { readable, active: active?, spares })
    }
}

/// Creates `dir` if needed, clears half-prepared segments and makes sure
/// there is at least one segment to recover.
fn prepare_dir(dir: &Path, segment_bytes: u64) -> Result<(), WalError> {
    let ctx = |what: &str| format!("{what} {}", dir.display());
    std::fs::create_dir_all(dir).map_err(|e| WalError::io(ctx("creating"), e))?;
    segment::remove_temp_files(dir).map_err(|e| WalError::io(ctx("cleaning"), e))?;
    let existing = segment::list(dir).map_err(|e| WalError::io(ctx("listing"), e))?;
    if existing.is_empty() {
        let never = AtomicBool::new(false);
        segment::create(dir, 0, segment_bytes, &never)
            .map_err(|e| WalError::io(ctx("creating the first segment in"), e))?;
        // The directory itself may be new; make its entry durable too.
        let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        segment::sync_dir(parent).map_err(|e| WalError::io(ctx("syncing the parent of"), e))?;
    }
    Ok(())
}
