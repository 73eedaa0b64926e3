//! openraft's state machine over the pure `regina_state::State`.
//!
//! Applying an entry runs `State::apply` under the write lock, then performs
//! the body writes it asked for. Body files are not fsynced per entry: the
//! Raft log already holds every payload, and replay rewrites bodies at the
//! same positions. They are fsynced before a snapshot, because the snapshot
//! lets the log behind it be purged.
//!
//! A body write that finds no space does not fail its entry: the body store
//! keeps it in memory and a task here retries it until space is back (see
//! `regina_storage::bodies`); a snapshot waits for it.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{EntryPayload, RaftSnapshotBuilder, SnapshotMeta, StorageIOError, StoredMembership};
use parking_lot::{Mutex, RwLock};
use regina_state::{BytesLeft, Command, Outcome, State};
use regina_storage::{BodyStore, SnapshotStore, SnapshotStream};
use tokio::sync::Notify;

use crate::answers::Ticket;
use crate::backup::SnapshotHead;
use crate::types::{LogId, NodeId, RaftEntry, StorageError, TypeConfig};

pub type Membership = StoredMembership<NodeId, openraft::BasicNode>;

/// The applied state and the log position it reflects, changed together.
pub struct Machine {
    pub state: State,
    pub last_applied: Option<LogId>,
    pub membership: Membership,
}

/// What the HTTP side reads: the machine, the message bodies, and a signal
/// raised after every applied batch (long polls wait on it).
pub struct SharedState {
    pub machine: RwLock<Machine>,
    pub bodies: BodyStore,
    pub applied: Notify,
    snapshots: SnapshotStore,
    snapshot_seq: AtomicU64,
    /// Who answers the requests waiting for entries this node proposed,
    /// once set by its proposer (`crate::answers`).
    answers: std::sync::OnceLock<Arc<dyn crate::answers::Deliver>>,
    /// Where body segments of a snapshot being received are staged, one
    /// directory per snapshot id.
    incoming: PathBuf,
    /// A task is retrying bodies that found no space.
    retrying_bodies: AtomicBool,
    /// The encoded size of the latest snapshot (built, installed or loaded;
    /// 0 before any): how often to snapshot, and how large a buffer the
    /// next encode starts with.
    snapshot_bytes: AtomicU64,
    /// The meta of the snapshot this store was opened from, until the
    /// first [`RaftStateMachine::get_current_snapshot`] takes it: see
    /// there.
    opened_from: Mutex<Option<SnapshotMeta<NodeId, openraft::BasicNode>>>,
}

impl SharedState {
    /// Makes `to` answer the requests registered under the tickets of
    /// entries this node proposes, as soon as each is applied. One
    /// deliverer per state machine: false if one was set already.
    pub fn answer_applied_through(&self, to: Arc<dyn crate::answers::Deliver>) -> bool {
        self.answers.set(to).is_ok()
    }

    /// Hands the outcome of the entry applied at `log_id` to the requests
    /// waiting under its ticket on this node. Gives it back, for openraft
    /// to carry, where none wait here (no ticket, no deliverer, or the
    /// waiters were answered already).
    pub fn deliver(&self, ticket: Ticket, log_id: LogId, outcome: Outcome) -> Option<Outcome> {
        match (ticket.0, self.answers.get()) {
            (Some(ticket), Some(to)) => to.deliver(ticket, log_id, outcome),
            _ => Some(outcome),
        }
    }

    /// The encoded size of the latest snapshot, 0 before any.
    pub fn snapshot_bytes(&self) -> u64 {
        self.snapshot_bytes.load(Ordering::Relaxed)
    }

    /// Reads a message body written by an applied push.
    pub fn read_body(&self, pos: u64, len: u32) -> std::io::Result<Vec<u8>> {
        self.bodies.read(pos, len as u64)
    }

    /// Stages one body segment of snapshot `snapshot_id` before the snapshot
    /// itself arrives.
    pub fn stage_body_segment(&self, snapshot_id: &str, segment: u64, bytes: &[u8]) -> std::io::Result<()> {
        let dir = self.staging_dir(snapshot_id).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{snapshot_id:?} is not a snapshot id"))
        })?;
        self.bodies.stage_segment(&dir, segment, bytes)
    }

    /// The newest snapshot on disk, meta and data.
    fn latest_snapshot(&self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let loaded = self.snapshots.load_latest().map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        let Some((head, data)) = loaded else {
            return Ok(None);
        };
        let head: SnapshotHead = bincode::deserialize(&head).map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(Some(Snapshot { meta: head.meta, snapshot: Box::new(Cursor::new(data)) }))
    }

    /// `snapshot` as a transport sends it: one answered without its data
    /// (see [`RaftStateMachine::get_current_snapshot`]) is replaced by the
    /// newest snapshot on disk, read whole, which is at least as new.
    pub fn snapshot_to_send(&self, snapshot: Snapshot<TypeConfig>) -> Result<Snapshot<TypeConfig>, StorageError> {
        if !snapshot.snapshot.get_ref().is_empty() {
            return Ok(snapshot);
        }
        self.latest_snapshot()?.ok_or_else(|| {
            let e = std::io::Error::new(std::io::ErrorKind::NotFound, "no snapshot file");
            StorageIOError::read_snapshot(Some(snapshot.meta.signature()), &e).into()
        })
    }

    /// The group's snapshot files.
    pub(crate) fn snapshots(&self) -> &SnapshotStore {
        &self.snapshots
    }

    /// The staging directory of a snapshot being received. `None` when the
    /// id is not one this crate makes (it names a directory).
    pub fn staging_dir(&self, snapshot_id: &str) -> Option<PathBuf> {
        let ours = !snapshot_id.is_empty() && snapshot_id.bytes().all(|b| b.is_ascii_digit() || b == b'-');
        ours.then(|| self.incoming.join(snapshot_id))
    }
}

/// A snapshot read back: its head, its state and its size.
struct Loaded {
    head: SnapshotHead,
    state: State,
    bytes: u64,
}

/// The newest snapshot that is whole, decoded as it is read
/// ([`SnapshotStream`]). A damaged file (its checksum, its head or its
/// length wrong) is skipped with a warning and left on disk; a whole one
/// that does not decode stops the open.
fn load_newest(snapshots: &SnapshotStore) -> Result<Option<Loaded>, String> {
    let loaded = snapshots.newest_whole(|path| {
        let started = std::time::Instant::now();
        let mut stream = match SnapshotStream::open(path) {
            Ok(stream) => stream,
            Err(reason) => return Ok(Err(reason)),
        };
        let bytes = stream.data_len();
        let head = bincode::deserialize::<SnapshotHead>(stream.meta()).map_err(|e| format!("snapshot head: {e}"));
        let state =
            head.as_ref().map_err(Clone::clone).and_then(|_| State::decode_from(&mut StreamedData(&mut stream)));
        // Whatever was decoded counts only if the file was whole; a file
        // that was not explains a failed decode too.
        let unread = match stream.finish() {
            Ok(unread) => unread,
            Err(reason) => return Ok(Err(reason)),
        };
        let (head, state) = (head.map_err(std::io::Error::other)?, state.map_err(std::io::Error::other)?);
        if unread > 0 {
            let early = format!("the snapshot's state ended {unread} bytes before its data did");
            return Err(std::io::Error::other(early));
        }
        // A restart's first long wait: the snapshot read and decoded at once.
        tracing::info!(bytes, load_ms = started.elapsed().as_millis() as u64, "snapshot loaded");
        Ok(Ok(Loaded { head, state, bytes }))
    });
    loaded.map_err(|e| e.to_string())
}

/// A snapshot stream as the state's decoder reads it: through `Read`, and
/// knowing the bytes it has left, against which each length is checked.
struct StreamedData<'s>(&'s mut SnapshotStream);

impl std::io::Read for StreamedData<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(out)
    }

    #[inline]
    fn read_exact(&mut self, out: &mut [u8]) -> std::io::Result<()> {
        self.0.read_exact(out)
    }
}

impl BytesLeft for StreamedData<'_> {
    fn bytes_left(&self) -> u64 {
        self.0.bytes_left()
    }
}

#[derive(Clone)]
pub struct StateMachineStore {
    shared: Arc<SharedState>,
}

impl StateMachineStore {
    /// Opens the state machine under `dir`: the newest snapshot if there is
    /// one, with body files cut back to what that snapshot covers or to the
    /// body store's durable mark, whichever lies further (the log replay
    /// after the snapshot writes the rest).
    pub fn open(dir: &Path) -> Result<StateMachineStore, String> {
        Self::open_keeping_recent(dir, regina_storage::RECENT_BODY_BYTES)
    }

    /// [`StateMachineStore::open`], keeping the newest `recent_body_bytes`
    /// of message bodies in memory for reads (`BodyStore::keeping_recent`).
    pub fn open_keeping_recent(dir: &Path, recent_body_bytes: usize) -> Result<StateMachineStore, String> {
        Self::open_with(dir, Arc::new(regina_storage::RealIo), recent_body_bytes)
    }

    /// [`StateMachineStore::open`], with bodies and snapshots written and
    /// synced through `io` (a simulated disk, in the simulation).
    pub fn open_with_io(dir: &Path, io: Arc<dyn regina_storage::Io>) -> Result<StateMachineStore, String> {
        Self::open_with(dir, io, regina_storage::RECENT_BODY_BYTES)
    }

    fn open_with(
        dir: &Path,
        io: Arc<dyn regina_storage::Io>,
        recent_body_bytes: usize,
    ) -> Result<StateMachineStore, String> {
        let snapshots = SnapshotStore::open_with_io(dir.join("snapshots"), io.clone()).map_err(|e| e.to_string())?;
        let segment_bytes = regina_state::body::BODY_SEGMENT_BYTES;
        let bodies = BodyStore::open_with_io(dir.join("bodies"), segment_bytes, io)
            .map_err(|e| e.to_string())?
            .keeping_recent(recent_body_bytes);
        let mut machine = Machine { state: State::new(), last_applied: None, membership: Membership::default() };
        let mut snapshot_bytes = 0;
        let mut opened_from = None;
        if let Some(loaded) = load_newest(&snapshots)? {
            machine.state = loaded.state;
            machine.last_applied = loaded.head.meta.last_log_id;
            machine.membership = loaded.head.meta.last_membership.clone();
            snapshot_bytes = loaded.bytes;
            opened_from = Some(loaded.head.meta);
        }
        // Segments below the durable mark stay: the replay skips their
        // bodies (`BodyStore::hold_writeback`).
        let cut = bodies.recovery_cut(machine.state.next_body_pos).map_err(|e| e.to_string())?;
        bodies.truncate_from(cut).map_err(|e| e.to_string())?;
        // A transfer cut short by a crash leaves staged segments that no
        // snapshot will adopt.
        let incoming = dir.join("bodies.incoming");
        if incoming.exists() {
            std::fs::remove_dir_all(&incoming).map_err(|e| format!("cannot clear {}: {e}", incoming.display()))?;
        }
        let shared = SharedState {
            machine: RwLock::new(machine),
            bodies,
            applied: Notify::new(),
            snapshots,
            snapshot_seq: AtomicU64::new(0),
            incoming,
            retrying_bodies: AtomicBool::new(false),
            answers: std::sync::OnceLock::new(),
            snapshot_bytes: AtomicU64::new(snapshot_bytes),
            opened_from: Mutex::new(opened_from),
        };
        Ok(StateMachineStore { shared: Arc::new(shared) })
    }

    pub fn shared(&self) -> Arc<SharedState> {
        self.shared.clone()
    }

    fn apply_one(&self, entry: RaftEntry) -> Result<Outcome, StorageError> {
        let log_id = entry.log_id;
        let mut m = self.shared.machine.write();
        m.last_applied = Some(log_id);
        let (applied, entry) = match entry.payload {
            EntryPayload::Blank => return Ok(Outcome::Done),
            EntryPayload::Membership(mem) => {
                m.membership = StoredMembership::new(Some(log_id), mem);
                return Ok(Outcome::Done);
            }
            EntryPayload::Normal(proposed) => (m.state.apply(&proposed.entry), proposed.entry),
        };
        // Bodies are written before the lock is released: a snapshot taken
        // under the lock may then rely on every body its state points at
        // having been handed to the file system.
        let writes: Vec<(u64, &[u8])> = applied.writes.iter().map(|w| (w.pos, w.bytes.as_slice())).collect();
        self.shared.bodies.write_many(&writes).map_err(|e| StorageIOError::apply(log_id, &e))?;
        drop(m);
        free_off_the_apply_path(entry.command);
        if !applied.writes.is_empty() {
            retry_bodies_later(&self.shared);
        }
        Ok(applied.outcome)
    }
}

/// Frees an applied entry. A push is usually shared with the log's
/// cache, and letting go of it costs a count; a push read back from the
/// WAL, as a restart re-applies them, is its messages' last holder, and
/// freeing them was a tenth of the re-apply (and, before this, done under
/// the state's lock). That is handed to the thread that frees for the
/// whole process. A tenant's push is the same push inside its wrapper.
fn free_off_the_apply_path(command: Command) {
    match command {
        Command::Push(push) if Arc::strong_count(&push) == 1 => crate::background_drop::drop_in_background(push),
        Command::ForTenant { command, .. } => free_off_the_apply_path(*command),
        _ => {}
    }
}

/// Starts a task that writes the bodies kept for lack of space, once space
/// is back, unless one runs already or none is kept.
fn retry_bodies_later(shared: &Arc<SharedState>) {
    if shared.bodies.unwritten().is_none() || shared.retrying_bodies.swap(true, Ordering::AcqRel) {
        return;
    }
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let mut pause = regina_storage::space::SPACE_RETRY_FIRST_MS;
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
            pause = (pause * 2).min(regina_storage::space::SPACE_RETRY_MAX_MS);
            let bodies = Arc::clone(&shared);
            match tokio::task::spawn_blocking(move || bodies.bodies.retry_unwritten()).await {
                Ok(Ok(0)) => {}
                Ok(Ok(_)) => continue,
                // Kept in memory and served from there; the next snapshot
                // reports the error and stops the group (the log still holds
                // every body, so a restart writes them again).
                Ok(Err(e)) => tracing::error!(error = %e, "a message body kept for lack of space cannot be written"),
                Err(e) => tracing::error!(error = %e, "the body retry task failed"),
            }
            shared.retrying_bodies.store(false, Ordering::Release);
            // A body kept since the last try would otherwise find no retrier.
            if shared.bodies.unwritten().is_none() || shared.retrying_bodies.swap(true, Ordering::AcqRel) {
                return;
            }
        }
    });
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        // On a blocking thread so the async workers keep serving. Where
        // partitions and messages outnumber other rows, copied under the
        // read lock and encoded outside it (`State::copy_to_encode`):
        // partitions are shared in chunks of 1,024 and the indexes over
        // them are written from them, so the copy walks queues, groups and
        // rows but not one partition or message (1 ms at 10 M partitions),
        // and applying copies a shared chunk and partition only when it
        // next writes to it (once each per snapshot). Encoding under the
        // lock stopped applying for seconds (7 s at 15 M messages in 1,000
        // partitions, 2 s at 10 M partitions). Where KV rows, jobs or
        // timers dominate, the copy would cost nearly what the encode
        // does, and a second copy of every row, so the encode holds the
        // lock (`State::copy_is_cheaper`). A copy is encoded straight
        // into the snapshot file, never whole in memory. How long the lock
        // was held, and how long the save took, are logged.
        let shared = self.shared.clone();
        let taken = tokio::task::spawn_blocking(move || {
            let started = std::time::Instant::now();
            let m = shared.machine.read();
            let seq = shared.snapshot_seq.fetch_add(1, Ordering::Relaxed);
            let idx = m.last_applied.map_or(0, |l| l.index);
            let meta = SnapshotMeta {
                last_log_id: m.last_applied,
                last_membership: m.membership.clone(),
                snapshot_id: format!("{idx:020}-{seq:010}"),
            };
            let copied = m.state.copy_is_cheaper();
            let source = if copied {
                SnapshotSource::Copy(Arc::new(m.state.copy_to_encode()))
            } else {
                // Sized exactly: a buffer grown by doubling copied the
                // encoding again at every step.
                SnapshotSource::Encoded(Arc::new(m.state.encode_into(Vec::with_capacity(m.state.encoded_len()))))
            };
            drop(m);
            tracing::info!(copied, locked_ms = started.elapsed().as_millis() as u64, "snapshot taken");
            (source, meta)
        });
        let (source, meta) =
            taken.await.map_err(|e| StorageIOError::write_snapshot(None, &std::io::Error::other(e)))?;
        // A snapshot that finds no space waits for it: openraft builds it
        // apart from applying, and giving up would stop the group.
        let saving = std::time::Instant::now();
        until_space_is_there("save a snapshot", || {
            let (shared, head, source) = (self.shared.clone(), meta.clone(), source.clone());
            async move {
                tokio::task::spawn_blocking(move || shared.save_snapshot(&head, &source))
                    .await
                    .map_err(std::io::Error::other)?
            }
        })
        .await
        .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        // Encoded (where copied), written and fsynced: its writeback
        // competes with the WAL's fsyncs.
        let bytes = self.shared.snapshot_bytes();
        // The snapshot opened from is no longer the newest.
        self.shared.opened_from.lock().take();
        tracing::info!(bytes, save_ms = saving.elapsed().as_millis() as u64, "snapshot saved");
        // openraft (0.9) keeps only the meta of a snapshot it had built;
        // whoever needs the data (a follower's install, a backup) reads the
        // file through `get_current_snapshot`. Reading it back here would
        // cost what streaming it into the file saved.
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(Vec::new())) })
    }
}

/// What a snapshot saves: a copy of the state sharing its partitions,
/// encoded into the file as it is written, or a state encoded under the
/// lock ([`regina_state::State::copy_is_cheaper`]). Shared, so a save
/// retried for lack of space starts again from the same state.
#[derive(Clone)]
enum SnapshotSource {
    Copy(Arc<regina_state::State>),
    Encoded(Arc<Vec<u8>>),
}

/// Runs `attempt` until it succeeds or fails for a reason other than lack
/// of space, waiting 10 ms to 500 ms between tries: a snapshot that finds
/// the disk full waits for space rather than failing its group (openraft
/// stops a group whose storage fails). `attempt` says where the work runs:
/// the build saves on a blocking thread, the install in place (a blocking
/// thread's wake-up would land at an unpredictable moment in the
/// simulation, which runs installs on its own thread).
async fn until_space_is_there<F, Fut>(what: &'static str, mut attempt: F) -> std::io::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::io::Result<()>>,
{
    let mut pause = regina_storage::space::SPACE_RETRY_FIRST_MS;
    loop {
        match attempt().await {
            Err(e) if regina_storage::is_out_of_space(&e) => {
                tracing::warn!(error = %e, "no space to {what}; retrying until space is back");
                tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                pause = (pause * 2).min(regina_storage::space::SPACE_RETRY_MAX_MS);
            }
            done => return done,
        }
    }
}

impl SharedState {
    /// Makes every body the encoded state points at durable (they were
    /// written, or kept for lack of space, before their entry's lock was
    /// released; the log that could rewrite them is purged behind the
    /// snapshot), then saves the snapshot.
    fn save_snapshot(
        &self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        source: &SnapshotSource,
    ) -> std::io::Result<()> {
        self.bodies.sync_all()?;
        let head = bincode::serialize(&SnapshotHead { meta: meta.clone() }).expect("snapshot heads encode");
        let id = &meta.snapshot_id;
        let written = match source {
            SnapshotSource::Copy(state) => {
                // Sealed message chunks go to the chunk packs, each once:
                // a later snapshot names what an earlier one stored.
                let saved = self.snapshots.save_holed(id, &head, &mut |out| state.encode_holed(&mut Holes(out)))?;
                // What a holed snapshot wrote and what it named instead.
                tracing::info!(
                    file_bytes = saved.data_bytes,
                    pack_bytes = saved.pack_bytes,
                    flat_bytes = saved.flat_bytes,
                    holes = saved.holes,
                    "snapshot written"
                );
                saved.written()
            }
            SnapshotSource::Encoded(data) => {
                self.snapshots.save(id, &head, data)?;
                data.len() as u64
            }
        };
        // What the next snapshot is spaced by: what this one cost to write.
        self.snapshot_bytes.store(written, Ordering::Relaxed);
        Ok(())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = StateMachineStore;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, Membership), StorageError> {
        let m = self.shared.machine.read();
        Ok((m.last_applied, m.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, StorageError>
    where
        I: IntoIterator<Item = RaftEntry> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        let mut out = Vec::new();
        for mut e in entries {
            let log_id = e.log_id;
            let ticket = Ticket::take(&mut e);
            let outcome = self.apply_one(e)?;
            // Answered here, openraft carries only a placeholder back.
            out.push(self.shared.deliver(ticket, log_id, outcome).unwrap_or(Outcome::Done));
        }
        self.shared.applied.notify_waiters();
        Ok(out)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, openraft::BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let sig = Some(meta.signature());
        let state =
            State::decode(&data).map_err(|e| StorageIOError::read_snapshot(sig.clone(), &std::io::Error::other(e)))?;
        // The sender streamed the body segments its state points at before
        // the state itself; they replace ours, cut where the state's bodies
        // end (the log after the snapshot rewrites the rest).
        if let Some(staged) = self.shared.staging_dir(&meta.snapshot_id).filter(|d| d.exists()) {
            self.shared.bodies.adopt(&staged).map_err(|e| StorageIOError::write_snapshot(sig.clone(), &e))?;
        }
        self.shared.bodies.truncate_from(state.next_body_pos).map_err(|e| StorageIOError::write_snapshot(sig, &e))?;
        // Bodies sit at the same positions on every replica, so the ones
        // adopted also serve the state in place until it is swapped below,
        // however long the save waits for space.
        let head = bincode::serialize(&SnapshotHead { meta: meta.clone() }).expect("snapshot heads encode");
        let snapshots = &self.shared.snapshots;
        until_space_is_there("install a snapshot", || {
            std::future::ready(snapshots.save(&meta.snapshot_id, &head, &data))
        })
        .await
        .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.shared.snapshot_bytes.store(data.len() as u64, Ordering::Relaxed);
        self.shared.opened_from.lock().take();
        let mut m = self.shared.machine.write();
        m.state = state;
        m.last_applied = meta.last_log_id;
        m.membership = meta.last_membership.clone();
        drop(m);
        self.shared.applied.notify_waiters();
        Ok(())
    }

    /// The newest snapshot, read from its file. The first call after
    /// [`StateMachineStore::open`] is openraft's start (`Raft::new` reads
    /// the initial state, and of the snapshot it keeps only the meta): it
    /// is answered with the meta of the snapshot the store has just
    /// decoded and no data, sparing a second read of a file as large as
    /// the state (1.2 GB, about a second, at 10,000,000 partitions). Were such an
    /// answer ever sent to a follower, the transports read the data first
    /// ([`SharedState::snapshot_to_send`]).
    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        if let Some(meta) = self.shared.opened_from.lock().take() {
            return Ok(Some(Snapshot { meta, snapshot: Box::new(Cursor::new(Vec::new())) }));
        }
        self.shared.latest_snapshot()
    }
}

/// A state's holed encoding into a snapshot's data: each sealed chunk
/// stored in a chunk pack once, and named by the token it keeps.
struct Holes<'a, 'b>(&'a mut regina_storage::snapshot_holes::HoledData<'b>);

impl std::io::Write for Holes<'_, '_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes)
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.0.write_all(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl regina_state::snapshot_holes::HoledWrite for Holes<'_, '_> {
    fn hole(&mut self, hole: regina_state::snapshot_holes::Hole) -> std::io::Result<()> {
        let len = regina_state::msg_table::CHUNK * regina_state::snapshot_holes::META_BYTES;
        if let Some(token) = self.0.hole(hole.placed(), len, &|| hole.chunk_bytes(), hole.byte_range())? {
            hole.set_placed(token);
        }
        Ok(())
    }
}
