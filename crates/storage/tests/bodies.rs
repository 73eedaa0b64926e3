//! Message body segments.

// Tests unwrap (a failure names its line) and may run long.
#![allow(clippy::unwrap_used, clippy::too_many_lines)]

mod support;

use std::io::ErrorKind;
use std::sync::Arc;
use std::thread;

use regina_storage::{place, BodyStore, FaultyIo};
use support::{fast_tempdir, AdviceLog, Lcg};

/// The segment files in `dir` (not the cut ones still being deleted).
fn body_files(dir: &std::path::Path) -> Vec<String> {
    all_files(dir).into_iter().filter(|n| n.ends_with(".body")).collect()
}

fn all_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Waits (10 s at most) until `dir` holds no cut segment: they are deleted
/// in the background.
fn wait_for_deletions(dir: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while all_files(dir).iter().any(|n| n.ends_with(".deleting")) {
        assert!(std::time::Instant::now() < deadline, "cut segments never deleted: {:?}", all_files(dir));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn place_keeps_bodies_inside_one_segment() {
    assert_eq!(place(0, 10, 100), 0);
    assert_eq!(place(90, 10, 100), 90);
    assert_eq!(place(95, 10, 100), 100);
    assert_eq!(place(100, 100, 100), 100);
    assert_eq!(place(101, 100, 100), 200);
    assert_eq!(place(150, 0, 100), 150);
    assert_eq!(place(199, 1, 100), 199);
}

/// Places and writes bodies of random sizes; returns (pos, body) pairs.
fn write_bodies(store: &BodyStore, count: usize, max_len: u64, seed: u64) -> Vec<(u64, Vec<u8>)> {
    let mut rng = Lcg(seed);
    let mut next_free = 0;
    let mut written = Vec::new();
    for _ in 0..count {
        let len = rng.below(max_len + 1);
        let pos = place(next_free, len, store.segment_bytes());
        let body = rng.bytes(len as usize);
        store.write_at(pos, &body).expect("write body");
        next_free = pos + len;
        written.push((pos, body));
    }
    written
}

#[test]
fn bodies_round_trip_across_segments_and_threads() {
    let dir = fast_tempdir();
    let store = Arc::new(BodyStore::open(dir.path(), 1000).expect("open"));
    let written = Arc::new(write_bodies(&store, 200, 400, 1));
    assert!(written.iter().any(|(pos, _)| pos % 1000 == 0 && *pos > 0), "no rollover");
    let readers: Vec<_> = (0..4)
        .map(|t| {
            let (store, written) = (Arc::clone(&store), Arc::clone(&written));
            thread::spawn(move || {
                for (pos, body) in written.iter().skip(t).step_by(4) {
                    assert_eq!(&store.read(*pos, body.len() as u64).expect("read"), body);
                }
            })
        })
        .collect();
    for r in readers {
        r.join().expect("reader");
    }
    store.sync_all().expect("sync");
    drop(store);
    let reopened = BodyStore::open(dir.path(), 1000).expect("reopen");
    for (pos, body) in written.iter() {
        assert_eq!(&reopened.read(*pos, body.len() as u64).expect("read"), body);
    }
}

#[test]
fn many_segments_outlive_the_handle_cache() {
    let dir = fast_tempdir();
    let store = BodyStore::open(dir.path(), 16).expect("open");
    for i in 0..300u64 {
        store.write_at(i * 16, &[i as u8; 16]).expect("write");
    }
    store.sync_all().expect("sync");
    for i in (0..300u64).rev() {
        assert_eq!(store.read(i * 16, 16).expect("read"), vec![i as u8; 16]);
    }
    assert_eq!(body_files(dir.path()).len(), 300);
}

#[test]
fn a_body_may_not_cross_a_segment_boundary() {
    let dir = fast_tempdir();
    let store = BodyStore::open(dir.path(), 100).expect("open");
    let err = store.write_at(95, &[0; 10]).expect_err("crosses the boundary");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = store.write_at(place(0, 101, 100), &[0; 101]).expect_err("too large");
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(store.read(95, 10).is_err());
}

#[test]
fn truncate_from_cuts_the_tail_for_replay() {
    let dir = fast_tempdir();
    let store = BodyStore::open(dir.path(), 100).expect("open");
    for segment in 0..4u64 {
        store.write_at(segment * 100, &[segment as u8; 60]).expect("write");
    }
    store.truncate_from(130).expect("truncate");
    assert_eq!(store.read(100, 30).expect("kept part"), vec![1; 30]);
    assert_eq!(store.read(120, 20).expect_err("cut part").kind(), ErrorKind::UnexpectedEof);
    assert_eq!(store.read(300, 10).expect_err("deleted").kind(), ErrorKind::NotFound);
    assert_eq!(
        body_files(dir.path()),
        vec!["00000000000000000000.body".to_string(), "00000000000000000001.body".to_string(),]
    );
    wait_for_deletions(dir.path());
    // Replay rewrites the tail.
    store.write_at(130, &[9; 30]).expect("rewrite");
    store.write_at(200, &[2; 60]).expect("rewrite next segment");
    store.sync_all().expect("sync");
    assert_eq!(store.read(130, 30).expect("read"), vec![9; 30]);
    assert_eq!(store.read(200, 60).expect("read"), vec![2; 60]);
    assert_eq!(store.read(0, 60).expect("untouched"), vec![0; 60]);
}

#[test]
fn a_cut_segment_left_by_a_crash_is_deleted_at_open() {
    let dir = fast_tempdir();
    let store = BodyStore::open(dir.path(), 100).expect("open");
    for segment in 0..3u64 {
        store.write_at(segment * 100, &[segment as u8; 60]).expect("write");
    }
    store.sync_all().expect("sync");
    drop(store);
    // What a crash between a cut's rename and its deletion leaves.
    std::fs::rename(
        dir.path().join("00000000000000000002.body"),
        dir.path().join("00000000000000000002.body.deleting"),
    )
    .expect("rename");
    let store = BodyStore::open(dir.path(), 100).expect("reopen");
    wait_for_deletions(dir.path());
    assert_eq!(
        all_files(dir.path()),
        vec!["00000000000000000000.body".to_string(), "00000000000000000001.body".to_string()]
    );
    // The segment number is free for a new segment.
    store.write_at(200, &[7; 10]).expect("write the segment again");
    assert_eq!(store.read(200, 10).expect("read"), vec![7; 10]);
}

#[test]
fn release_before_deletes_whole_segments_only() {
    let dir = fast_tempdir();
    let store = BodyStore::open(dir.path(), 100).expect("open");
    for segment in 0..5u64 {
        store.write_at(segment * 100 + 10, &[segment as u8; 20]).expect("write");
    }
    assert_eq!(store.release_before(250).expect("release"), 2);
    assert_eq!(store.read(10, 20).expect_err("released").kind(), ErrorKind::NotFound);
    assert_eq!(store.read(210, 20).expect("kept"), vec![2; 20]);
    assert_eq!(body_files(dir.path()).len(), 3);
    store.sync_all().expect("sync");
}

/// Bodies placed back to back, with gaps and segment rollovers among them,
/// written in one call: one write per run, and each body reads back as
/// written, before and after a reopen.
#[test]
fn write_many_joins_runs_and_keeps_every_body() {
    let dir = fast_tempdir();
    let io = Arc::new(FaultyIo::new());
    let store = BodyStore::open_with_io(dir.path(), 1000, io.clone()).expect("open");
    let mut rng = Lcg(7);
    let (mut next_free, mut written) = (0, Vec::new());
    for i in 0..300 {
        let len = rng.below(120);
        // Every 50th body leaves a gap, as a body placed elsewhere would.
        let from = if i % 50 == 49 { next_free + 3 } else { next_free };
        let pos = place(from, len, store.segment_bytes());
        written.push((pos, rng.bytes(len as usize)));
        next_free = pos + len;
    }
    let borrowed: Vec<(u64, &[u8])> = written.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    let before = io.writes();
    store.write_many(&borrowed).expect("write");
    let segments = next_free / 1000 + 1;
    let gaps = 300 / 50;
    assert!(io.writes() - before <= segments + gaps, "{} writes for {segments} segments", io.writes() - before);
    for (pos, body) in &written {
        assert_eq!(&store.read(*pos, body.len() as u64).expect("read"), body);
    }
    store.sync_all().expect("sync");
    drop(store);
    let reopened = BodyStore::open(dir.path(), 1000).expect("reopen");
    for (pos, body) in &written {
        assert_eq!(&reopened.read(*pos, body.len() as u64).expect("read"), body);
    }
}

/// A joined run that finds no space keeps each of its bodies readable (in
/// memory) until space is back, then writes them.
#[test]
fn write_many_without_space_keeps_each_body() {
    let dir = fast_tempdir();
    let io = Arc::new(FaultyIo::new());
    let store = BodyStore::open_with_io(dir.path(), 1000, io.clone()).expect("open");
    let bodies: Vec<(u64, Vec<u8>)> = (0..5u64).map(|i| (i * 10, vec![i as u8; 10])).collect();
    let borrowed: Vec<(u64, &[u8])> = bodies.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    io.fill_disk_for_writes();
    store.write_many(&borrowed).expect("kept, not failed");
    assert_eq!(store.unwritten().map(|(n, _)| n), Some(5));
    for (pos, body) in &bodies {
        assert_eq!(&store.read(*pos, 10).expect("read from memory"), body);
    }
    io.heal();
    assert_eq!(store.retry_unwritten().expect("retry"), 0);
    store.sync_all().expect("sync");
    drop(store);
    let reopened = BodyStore::open(dir.path(), 1000).expect("reopen");
    for (pos, body) in &bodies {
        assert_eq!(&reopened.read(*pos, 10).expect("read"), body);
    }
}

/// A segment the writes have moved past is advised at once (its writeback
/// starts) and again once `KEEP_CACHED_BYTES` of segments follow it (it
/// leaves the page cache); bodies retried behind the newest segment, and
/// the first write after a cut, advise nothing. Every body still reads back.
#[test]
fn segments_moved_past_leave_the_page_cache_behind_a_window() {
    let dir = fast_tempdir();
    let segment = regina_storage::bodies::KEEP_CACHED_BYTES / 2;
    let log = Arc::new(AdviceLog::default());
    let store = BodyStore::open_with_io(dir.path(), segment, log.clone()).unwrap();
    let name = |s: u64| format!("{s:020}.body");
    let taken = || std::mem::take(&mut *log.advised.lock());

    store.write_at(10, b"first").unwrap();
    assert!(taken().is_empty(), "the first write finishes no segment");
    store.write_at(segment + 3, b"second").unwrap();
    assert_eq!(taken(), [name(0)]);
    store.write_at(2 * segment, b"third").unwrap();
    assert_eq!(taken(), [name(1)]);
    store.write_many(&[(3 * segment, b"fourth".as_slice()), (5 * segment, b"sixth")]).unwrap();
    // Segment 2 is done, then 0 is two segments (KEEP_CACHED_BYTES) behind it;
    // the jump to 5 finishes 3 and 4, dropping 1 and 2.
    assert_eq!(taken(), [name(2), name(0), name(3), name(1), name(4), name(2)]);
    store.write_at(4 * segment + 1, b"late").unwrap();
    assert!(taken().is_empty(), "a write behind the newest segment finishes none");

    store.truncate_from(5 * segment).unwrap();
    store.write_at(5 * segment, b"again").unwrap();
    assert!(taken().is_empty(), "after a cut, the first write finishes no segment");
    store.write_at(6 * segment, b"next").unwrap();
    assert_eq!(taken(), [name(5), name(3)]);

    // The advice never costs a byte.
    for (pos, body) in
        [(10, &b"first"[..]), (segment + 3, b"second"), (3 * segment, b"fourth"), (4 * segment + 1, b"late")]
    {
        assert_eq!(store.read(pos, body.len() as u64).unwrap(), body);
    }
}

/// The segment being written starts its writeback every
/// `WRITEBACK_STEP_BYTES`, from where the last step ended; a new segment
/// starts from its beginning, and a write behind the last step (a retried
/// body) starts none. Every body still reads back.
#[test]
fn a_segment_being_written_starts_its_writeback_in_steps() {
    use regina_storage::bodies::WRITEBACK_STEP_BYTES as STEP;
    let dir = fast_tempdir();
    let segment = 4 * STEP;
    let log = Arc::new(AdviceLog::default());
    let store = BodyStore::open_with_io(dir.path(), segment, log.clone()).unwrap();
    let taken = || std::mem::take(&mut *log.written_back.lock());
    let piece = (STEP / 3) as usize;
    let body = |i: u64| vec![(i % 251) as u8; piece];

    let mut at = 0;
    let mut written = Vec::new();
    for i in 0..7 {
        store.write_at(at, &body(i)).unwrap();
        written.push((at, body(i)));
        at += piece as u64;
    }
    // Three pieces fall short of a step by a byte; the fourth ends past it.
    assert_eq!(taken(), [(0, 4 * piece as u64)]);
    store.write_at(piece as u64, &body(1)).unwrap();
    assert!(taken().is_empty(), "a rewrite behind the last step starts none");
    // Into the next segment: counted from its start.
    store.write_many(&[(segment, body(8).as_slice()), (segment + piece as u64, &body(9))]).unwrap();
    assert!(taken().is_empty());
    store.write_at(segment + STEP, b"x").unwrap();
    assert_eq!(taken(), [(0, STEP + 1)]);
    for (pos, body) in written {
        assert_eq!(store.read(pos, body.len() as u64).unwrap(), body);
    }
}

/// While writeback is held, writes start none and advise no segment. Once
/// released, everything written meanwhile is written back in steps of at
/// most `WRITEBACK_STEP_BYTES` that never cross a segment, and the
/// segments that fell `KEEP_CACHED_BYTES` behind the ones finished
/// meanwhile leave the page cache. Later writes step on from where the
/// held ones ended. Every body still reads back.
#[test]
fn writeback_held_during_recovery_is_written_back_in_steps_once_released() {
    use regina_storage::bodies::{KEEP_CACHED_BYTES, WRITEBACK_STEP_BYTES as STEP};
    let dir = fast_tempdir();
    let segment = 2 * STEP + STEP / 2;
    assert!(KEEP_CACHED_BYTES / segment >= 2);
    let lag = KEEP_CACHED_BYTES / segment;
    let log = Arc::new(AdviceLog::default());
    let store = BodyStore::open_with_io(dir.path(), segment, log.clone()).unwrap();
    let name = |s: u64| format!("{s:020}.body");
    let piece = (STEP / 2) as usize;
    let body = |i: u64| vec![(i % 251) as u8; piece];

    // Before the hold: the first step of segment 0 is started as usual.
    let mut written = Vec::new();
    let mut at = 0;
    for i in 0..3 {
        store.write_at(at, &body(i)).unwrap();
        written.push((at, body(i)));
        at += piece as u64;
    }
    assert_eq!(std::mem::take(&mut *log.written_back.lock()), [(0, STEP)]);

    // Held: the rest of segment 0, then segments up to `lag + 1`.
    store.hold_writeback();
    let held_from = at;
    let last = lag + 1;
    for i in 3..20 {
        store.write_at(at, &body(i)).unwrap();
        written.push((at, body(i)));
        at += piece as u64;
    }
    store.write_at(last * segment, &body(99)).unwrap();
    written.push((last * segment, body(99)));
    let held_to = last * segment + piece as u64;
    assert!(log.written_back.lock().is_empty(), "a held write starts no writeback");
    assert!(log.advised.lock().is_empty(), "a held write advises no segment");

    store.release_writeback(0).unwrap();
    // What each segment was written from and to, in steps.
    let step = |from: u64, to: u64| {
        let starts = (from..to).step_by(STEP as usize);
        starts.map(move |at| (at, STEP.min(to - at)))
    };
    let mut expected: Vec<(u64, u64)> = step(held_from, segment).collect();
    for _ in 1..4 {
        expected.extend(step(0, segment));
    }
    expected.extend(step(0, piece as u64));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while log.advised.lock().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the held writeback never finished");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(std::mem::take(&mut *log.written_back.lock()), expected);
    // The segments finished while held were 0..last; of those, `lag` and
    // beyond drop the one `lag` behind them.
    assert_eq!(std::mem::take(&mut *log.advised.lock()), (0..last - lag).map(name).collect::<Vec<_>>());

    // After the release: steps count from where the held writes ended.
    let next = held_to;
    store.write_at(next, &vec![7u8; STEP as usize]).unwrap();
    assert_eq!(std::mem::take(&mut *log.written_back.lock()), [(next % segment, STEP)]);
    for (pos, body) in written {
        assert_eq!(store.read(pos, body.len() as u64).unwrap(), body);
    }
}

/// Bodies of 1,000 bytes, four to a 4,096-byte segment, from position 0:
/// `count` of them, body `i` filled with byte `i`.
fn four_to_a_segment(count: u64) -> Vec<(u64, Vec<u8>)> {
    (0..count).map(|i| ((i / 4) * 4096 + (i % 4) * 1000, vec![i as u8; 1000])).collect()
}

fn write_all(store: &BodyStore, bodies: &[(u64, Vec<u8>)]) {
    let borrowed: Vec<(u64, &[u8])> = bodies.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    store.write_many(&borrowed).expect("write");
}

/// Segments the writes moved past are fsynced and marked durable; a
/// restart keeps them whole, and while its writeback is held (the replay)
/// writes below the mark are skipped, those past it made.
#[test]
fn finished_segments_are_marked_durable_and_a_replay_skips_them() {
    let dir = fast_tempdir();
    let io = Arc::new(FaultyIo::new());
    let store = BodyStore::open_with_io(dir.path(), 4096, io.clone()).expect("open").syncing_behind(0);
    let bodies = four_to_a_segment(14); // segments 0 to 3, the last one half full
    write_all(&store, &bodies);
    assert_eq!(store.durable_before(), 0);
    let syncs = io.syncs();
    store.sync_finished().expect("sync finished");
    assert_eq!(store.durable_before(), 3 * 4096, "every segment below the newest");
    assert_eq!(io.syncs() - syncs, 4, "segments 0, 1 and 2, then the mark");
    store.sync_finished().expect("again");
    assert_eq!(io.syncs() - syncs, 4, "nothing new moved past: no fsync");
    drop(store);

    // The restart: the state loaded says its bodies end at 1,000.
    let store = BodyStore::open_with_io(dir.path(), 4096, io.clone()).expect("reopen");
    assert_eq!(store.durable_before(), 3 * 4096);
    let cut = store.recovery_cut(1000).expect("cut");
    assert_eq!(cut, 3 * 4096);
    store.truncate_from(cut).expect("truncate");
    wait_for_deletions(dir.path());
    assert_eq!(body_files(dir.path()).len(), 4, "segments 0 to 2 kept, 3 cut to nothing");
    store.hold_writeback();
    // A replay writes the same bytes; other bytes show whether a write was made.
    let replayed: Vec<(u64, Vec<u8>)> = bodies.iter().map(|(p, b)| (*p, vec![b[0] ^ 0xff; 1000])).collect();
    write_all(&store, &replayed[1..]);
    for (i, (pos, body)) in bodies.iter().enumerate().skip(1) {
        let expect = if *pos < 3 * 4096 { body } else { &replayed[i].1 };
        assert_eq!(&store.read(*pos, 1000).expect("read"), expect, "body {i} at {pos}");
    }
    store.release_writeback(14 * 1000).expect("release");
    // Past the replay, nothing is skipped.
    store.write_at(0, &replayed[0].1).expect("write");
    assert_eq!(store.read(0, 1000).expect("read"), replayed[0].1);
}

/// A replay that ends below the mark lowers it to its own segment's start;
/// a cut below the mark, or an adopted snapshot's segments, lower it first.
#[test]
fn the_mark_comes_down_before_what_it_covers_changes() {
    let dir = fast_tempdir();
    let store = BodyStore::open(dir.path(), 4096).expect("open").syncing_behind(4096);
    write_all(&store, &four_to_a_segment(23)); // segments 0 to 5
    store.sync_finished().expect("sync finished");
    assert_eq!(store.durable_before(), 4 * 4096, "the segments one segment behind the newest");
    store.hold_writeback();
    store.release_writeback(3 * 4096 + 10).expect("release");
    assert_eq!(store.durable_before(), 3 * 4096);
    store.truncate_from(4096 + 100).expect("truncate");
    assert_eq!(store.durable_before(), 4096 + 100);
    drop(store);
    let store = BodyStore::open(dir.path(), 4096).expect("reopen").syncing_behind(0);
    assert_eq!(store.durable_before(), 4096 + 100, "lowered durably");
    // A mark whose segments are gone is not trusted.
    write_all(&store, &four_to_a_segment(22)[5..]);
    store.sync_finished().expect("sync finished");
    assert_eq!(store.durable_before(), 5 * 4096);
    std::fs::remove_file(dir.path().join(format!("{:020}.body", 2))).expect("remove");
    assert_eq!(store.recovery_cut(100).expect("cut"), 100);
    assert_eq!(store.durable_before(), 100);
    let staged = fast_tempdir();
    store.stage_segment(staged.path(), 0, &[7; 100]).expect("stage");
    store.adopt(staged.path()).expect("adopt");
    assert_eq!(store.durable_before(), 0);
}

/// A failed fsync raises no mark, and neither does a body below the newest
/// segment still waiting for space.
#[test]
fn the_mark_rises_only_over_what_is_on_disk() {
    let dir = fast_tempdir();
    let io = Arc::new(FaultyIo::new());
    let store = BodyStore::open_with_io(dir.path(), 4096, io.clone()).expect("open").syncing_behind(0);
    let bodies = four_to_a_segment(10);
    write_all(&store, &bodies[..5]);
    io.fail_next_sync();
    assert!(store.sync_finished().is_err());
    assert_eq!(store.durable_before(), 0);
    assert!(store.sync_finished().is_err(), "an fsync that failed once fails every later sync");
    assert_eq!(store.durable_before(), 0);

    let dir = fast_tempdir();
    let io = Arc::new(FaultyIo::new());
    let store = BodyStore::open_with_io(dir.path(), 4096, io.clone()).expect("open").syncing_behind(0);
    io.fill_disk_for_writes();
    write_all(&store, &bodies[..5]);
    io.heal();
    write_all(&store, &bodies[5..]);
    store.sync_finished().expect("sync finished");
    assert_eq!(store.durable_before(), 0, "bodies of segment 0 wait in memory");
    assert_eq!(store.retry_unwritten().expect("retry"), 0);
    store.sync_finished().expect("sync finished");
    assert_eq!(store.durable_before(), 2 * 4096);
}
