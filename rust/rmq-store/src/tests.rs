//! Engine-level tests on real files in a temp directory (the format modules carry their own unit tests).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::format::cq_unit::CqUnit;
use crate::format::message::{decode_record, encode_property_into, tags_hash, BLANK_MAGIC};
use crate::*;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "rmq-store-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn small_config() -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 4096,
        mapped_file_size_consume_queue: 100 * 20,
        flush_interval_commit_log_ms: 50,
        max_hash_slot_num: 16,
        max_index_num: 8,
        ..StoreConfig::default()
    }
}

fn ctx(ts: i64) -> PutContext {
    PutContext {
        sys_flag: 0,
        born_timestamp: ts,
        born_host: Host::parse("10.1.2.3", 5555).unwrap(),
        reconsume_times: 0,
        store_timestamp: ts,
        prepared_transaction_offset: 0,
    }
}

fn props(tags: Option<&str>) -> Vec<u8> {
    let mut v = Vec::new();
    if let Some(t) = tags {
        encode_property_into(&mut v, b"TAGS", t.as_bytes());
    }
    encode_property_into(&mut v, b"KEYS", b"k");
    v
}

/// Puts `n` messages of `body_len` bytes to (topic, qid), tags alternating A/B; returns results.
fn put_n(
    store: &MessageStore,
    topic: &str,
    qid: i32,
    n: usize,
    body_len: usize,
    ts: i64,
) -> Vec<PutResult> {
    let bodies: Vec<Vec<u8>> = (0..n)
        .map(|i| vec![b'a' + (i % 26) as u8; body_len])
        .collect();
    let ps: Vec<Vec<u8>> = (0..n)
        .map(|i| props(Some(if i % 2 == 0 { "A" } else { "B" })))
        .collect();
    let msgs: Vec<PutMessage> = (0..n)
        .map(|i| PutMessage {
            topic,
            body: &bodies[i],
            flag: i as i32,
            properties: &ps[i],
            queue_id: qid,
            own: None,
        })
        .collect();
    store.put_messages(&msgs, &ctx(ts)).unwrap()
}

fn all(store: &MessageStore, topic: &str, qid: i32, offset: i64, max: i32) -> GetMessageResult {
    store
        .get_message(topic, qid, offset, max, &mut TagCodeFilter { codes: None })
        .unwrap()
}

fn records(body: &[u8]) -> Vec<crate::format::message::Record<'_>> {
    let mut out = Vec::new();
    let mut p = 0;
    while p < body.len() {
        let r = decode_record(&body[p..]).unwrap();
        p += r.total_size as usize;
        out.push(r);
    }
    out
}

#[test]
fn round_trip() {
    let dir = TempDir::new();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    let res = put_n(&store, "T", 0, 3, 10, 1000);
    let expect_len =
        crate::format::message::MIN_RECORD_LEN_V1_IPV4 + 10 + 1 + props(Some("A")).len();
    for (i, r) in res.iter().enumerate() {
        assert_eq!(r.status, PutMessageStatus::PutOk);
        assert_eq!(r.queue_offset, i as i64);
        assert_eq!(r.wrote_bytes as usize, expect_len);
        assert_eq!(r.commitlog_offset, (i * expect_len) as i64);
    }
    let g = all(&store, "T", 0, 0, 32);
    assert_eq!(g.status, GetMessageStatus::Found);
    assert_eq!(
        (
            g.message_count,
            g.next_begin_offset,
            g.min_offset,
            g.max_offset
        ),
        (3, 3, 0, 3)
    );
    let recs = records(&g.body);
    assert_eq!(recs.len(), 3);
    assert_eq!(recs[1].queue_offset, 1);
    assert_eq!(recs[1].flag, 1);
    assert_eq!(recs[2].physical_offset, res[2].commitlog_offset);
    assert_eq!(recs[0].store_host, Host::v4([127, 0, 0, 1], 10911));
    // CQ units
    let units = store.consume_queue_units("T", 0, 0, 10).unwrap();
    assert_eq!(units.len(), 60);
    let u = CqUnit::decode(&units[20..]);
    assert_eq!(
        u,
        CqUnit {
            offset: res[1].commitlog_offset,
            size: expect_len as i32,
            tags_code: tags_hash("B") as i64
        }
    );
    // reopen (normal) and read again
    store.close().unwrap();
    assert!(matches!(
        store.get_max_offset_in_queue("T", 0),
        Err(Error::Closed)
    ));
    store.close().unwrap();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    let rep = store.recovery_report();
    assert!(!rep.abnormal);
    assert_eq!(rep.commit_log_end, (3 * expect_len) as i64);
    assert_eq!(rep.truncated_bytes, 0);
    assert_eq!(store.get_max_offset_in_queue("T", 0).unwrap(), 3);
    let r = put_n(&store, "T", 0, 1, 10, 2000);
    assert_eq!(r[0].queue_offset, 3);
    assert_eq!(store.topics().unwrap(), vec![("T".to_string(), 0)]);
    assert_eq!(store.get_offset_in_queue_by_time("T", 0, 1500).unwrap(), 3);
    assert_eq!(store.get_offset_in_queue_by_time("T", 0, 0).unwrap(), 0);
    assert_eq!(store.get_offset_in_queue_by_time("T", 0, 9999).unwrap(), 4);
    assert_eq!(store.get_earliest_message_time("T", 0).unwrap(), 1000);
    let look = store
        .look_message_by_offset(res[1].commitlog_offset)
        .unwrap()
        .unwrap();
    assert_eq!(look.as_slice().len(), expect_len);
    assert!(matches!(
        store.look_message_by_offset(5),
        Err(Error::Corrupt { offset: 5, .. })
    ));
    // checkpoint after close
    store.close().unwrap();
    let cp = std::fs::read(dir.path().join("checkpoint")).unwrap();
    assert_eq!(cp.len(), 4096);
    assert_eq!(i64::from_be_bytes(cp[0..8].try_into().unwrap()), 2000);
    assert_eq!(
        i64::from_be_bytes(cp[32..40].try_into().unwrap()),
        (4 * expect_len) as i64
    );
    assert!(!dir.path().join("abort").exists());
}

#[test]
fn validation_and_statuses() {
    let dir = TempDir::new();
    let cfg = StoreConfig {
        max_message_size: 100,
        ..small_config()
    };
    let store = MessageStore::open(dir.path(), cfg).unwrap();
    let p = props(None);
    let ok = PutMessage {
        topic: "T",
        body: b"x",
        flag: 0,
        properties: &p,
        queue_id: 0,
        own: None,
    };
    let big = vec![0u8; 101];
    let r = store
        .put_messages(&[ok, PutMessage { body: &big, ..ok }], &ctx(1))
        .unwrap();
    assert!(r
        .iter()
        .all(|r| r.status == PutMessageStatus::MessageIllegal && r.commitlog_offset == -1));
    let huge_props = vec![b'a'; 40000];
    let r = store
        .put_messages(
            &[PutMessage {
                properties: &huge_props,
                ..ok
            }],
            &ctx(1),
        )
        .unwrap();
    assert_eq!(r[0].status, PutMessageStatus::PropertiesSizeExceeded);
    assert!(matches!(
        store.put_messages(
            &[
                ok,
                PutMessage {
                    topic: "bad topic",
                    ..ok
                }
            ],
            &ctx(1)
        ),
        Err(Error::IllegalTopic(_))
    ));
    assert!(matches!(
        store.put_messages(&[PutMessage { topic: "", ..ok }], &ctx(1)),
        Err(Error::IllegalTopic(_))
    ));
    let long = "a".repeat(128);
    assert!(matches!(
        store.put_messages(&[PutMessage { topic: &long, ..ok }], &ctx(1)),
        Err(Error::IllegalTopic(_))
    ));
    assert!(matches!(
        store.put_messages(&[PutMessage { queue_id: -1, ..ok }], &ctx(1)),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(store.max_physical_offset().unwrap(), 0);
    // transaction PREPARED: no unit, queue offset 0
    let mut c = ctx(1);
    c.sys_flag = 0x4;
    let r = store.put_messages(&[ok], &c).unwrap();
    assert_eq!(
        (r[0].status, r[0].queue_offset),
        (PutMessageStatus::PutOk, 0)
    );
    assert_eq!(store.get_max_offset_in_queue("T", 0).unwrap(), 0);
    assert!(store.topics().unwrap().is_empty());
}

#[test]
fn roll_over_with_blank() {
    let dir = TempDir::new();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    let res = put_n(&store, "T", 1, 40, 300, 1);
    assert!(res.iter().all(|r| r.status == PutMessageStatus::PutOk));
    let len = res[0].wrote_bytes as i64;
    let per_file = (4096 - 8) / len; // records that fit leaving 8 bytes
    assert_eq!(res[per_file as usize].commitlog_offset, 4096);
    let first = std::fs::read(dir.path().join("commitlog/00000000000000000000")).unwrap();
    let blank_at = (per_file * len) as usize;
    assert_eq!(
        i32::from_be_bytes(first[blank_at..blank_at + 4].try_into().unwrap()),
        4096 - blank_at as i32
    );
    assert_eq!(
        i32::from_be_bytes(first[blank_at + 4..blank_at + 8].try_into().unwrap()),
        BLANK_MAGIC
    );
    assert!(dir.path().join("commitlog/00000000000000004096").exists());
    // read all across files (CQ also rolls: 100 units per file)
    let mut off = 0;
    let mut n = 0;
    while off < 40 {
        let g = all(&store, "T", 1, off, 32);
        assert_eq!(g.status, GetMessageStatus::Found);
        n += g.message_count;
        off = g.next_begin_offset;
    }
    assert_eq!(n, 40);
    // a record that cannot fit a whole file
    let big = vec![0u8; 4096];
    let p = props(None);
    let r = store
        .put_messages(
            &[PutMessage {
                topic: "T",
                body: &big,
                flag: 0,
                properties: &p,
                queue_id: 0,
                own: None,
            }],
            &ctx(1),
        )
        .unwrap();
    assert_eq!(r[0].status, PutMessageStatus::MessageIllegal);
    // reopen: recovery follows the BLANKs
    store.close().unwrap();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    assert_eq!(
        store.recovery_report().commit_log_end,
        res[39].commitlog_offset + len
    );
    assert_eq!(store.recovery_report().truncated_bytes, 0);
}

#[test]
fn every_get_message_status() {
    use GetMessageStatus::*;
    let dir = TempDir::new();
    std::fs::create_dir_all(dir.path().join("consumequeue/Empty/0")).unwrap();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    assert_eq!(all(&store, "Nope", 0, 0, 32).status, NoMatchedLogicQueue);
    assert!(!dir.path().join("consumequeue/Nope").exists());
    let g = all(&store, "Empty", 0, 5, 32);
    assert_eq!((g.status, g.next_begin_offset), (NoMessageInQueue, 0));
    let res = put_n(&store, "T", 0, 30, 300, 1);
    let g = all(&store, "T", 0, 30, 32);
    assert_eq!((g.status, g.next_begin_offset), (OffsetOverflowOne, 30));
    let g = all(&store, "T", 0, 31, 32);
    assert_eq!((g.status, g.next_begin_offset), (OffsetOverflowBadly, 0));
    // tag filter: only "B" (odd offsets); "C" matches nothing
    let codes = [tags_hash("C")];
    let g = store
        .get_message(
            "T",
            0,
            0,
            32,
            &mut TagCodeFilter {
                codes: Some(&codes),
            },
        )
        .unwrap();
    assert_eq!((g.status, g.next_begin_offset), (NoMatchedMessage, 30));
    let codes = [tags_hash("B")];
    let g = store
        .get_message(
            "T",
            0,
            0,
            32,
            &mut TagCodeFilter {
                codes: Some(&codes),
            },
        )
        .unwrap();
    assert_eq!((g.status, g.message_count), (Found, 15));
    // delete the first CommitLog files: found past the hole, MESSAGE_WAS_REMOVING when all is gone
    let v = put_n(&store, "V", 0, 30, 300, 1);
    let deleted = store
        .delete_commit_log_files_before(res[20].commitlog_offset)
        .unwrap();
    assert!(deleted >= 1);
    let g = all(&store, "T", 0, 0, 1);
    assert_eq!((g.status, g.next_begin_offset), (Found, 21));
    assert_eq!(
        records(&g.body)[0].physical_offset,
        res[20].commitlog_offset
    );
    store
        .delete_commit_log_files_before(v[29].commitlog_offset)
        .unwrap();
    let g = all(&store, "T", 0, 0, 32);
    assert_eq!((g.status, g.next_begin_offset), (MessageWasRemoving, 30));
    store.correct_min_offsets().unwrap();
    assert_eq!(store.get_min_offset_in_queue("T", 0).unwrap(), 30);
    let g = all(&store, "T", 0, 0, 32);
    assert_eq!((g.status, g.next_begin_offset), (OffsetTooSmall, 30));
    let g = all(&store, "T", 0, 31, 32);
    assert_eq!((g.status, g.next_begin_offset), (OffsetOverflowBadly, 30));
    let min_v = store.get_min_offset_in_queue("V", 0).unwrap();
    assert!(min_v > 0 && min_v < 30);
    assert_eq!(all(&store, "V", 0, min_v, 32).status, Found);
    // OFFSET_FOUND_NULL: the unit's file is gone while min says it exists (internal surgery)
    let put = put_n(&store, "U", 0, 150, 1, 1);
    assert_eq!(put[149].queue_offset, 149);
    let q = store.inner.queue("U", 0).unwrap();
    q.queue.delete_files_before(100 * 20).unwrap();
    let g = all(&store, "U", 0, 5, 32);
    assert_eq!((g.status, g.next_begin_offset), (OffsetFoundNull, 100));
}

#[test]
fn batch_full_by_count_and_bytes() {
    // in memory (huge RAM): count 32, bytes 256 KiB
    let dir = TempDir::new();
    let cfg = StoreConfig {
        mapped_file_size_commit_log: 1 << 20,
        ..small_config()
    };
    let store = MessageStore::open(dir.path(), cfg.clone()).unwrap();
    put_n(&store, "T", 0, 60, 10, 1);
    let g = all(&store, "T", 0, 0, 64);
    assert_eq!((g.message_count, g.next_begin_offset), (32, 32));
    let g = all(&store, "T", 0, 0, 5);
    assert_eq!((g.message_count, g.next_begin_offset), (5, 5));
    put_n(&store, "Big", 0, 40, 10_000, 1);
    let g = all(&store, "Big", 0, 0, 64);
    let rec = g.buffer_total_size / g.message_count as i64;
    assert_eq!(g.message_count as i64, 262_144 / rec);
    assert!(!g.suggest_pulling_from_slave);
    store.close().unwrap();
    // on disk (tiny RAM): count 8, bytes 64 KiB
    let cfg = StoreConfig {
        total_physical_memory: 1,
        ..cfg
    };
    let store = MessageStore::open(dir.path(), cfg).unwrap();
    let g = all(&store, "T", 0, 0, 64);
    assert_eq!((g.message_count, g.next_begin_offset), (8, 8));
    assert!(g.suggest_pulling_from_slave);
    let g = all(&store, "Big", 0, 0, 64);
    assert_eq!(g.message_count as i64, 65_536 / rec);
    assert!(store.is_the_batch_full(100, 32, 65_500, 3, true));
    assert!(!store.is_the_batch_full(100, 32, 65_500, 3, false));
    assert!(!store.is_the_batch_full(1 << 30, 32, 0, 0, true));
    assert!(store.is_the_batch_full(1, 32, 1, 8, true));
}

#[cfg(unix)]
fn commitlog_file(dir: &Path, start: u64) -> PathBuf {
    dir.join("commitlog").join(format!("{start:020}"))
}

#[test]
#[cfg(unix)] // writes torn bytes with pwrite (std::os::unix::fs::FileExt)
fn recovery_truncates_torn_tail_abnormal() {
    let dir = TempDir::new();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    let res = put_n(&store, "T", 0, 5, 100, 1);
    let end = res[4].commitlog_offset + res[4].wrote_bytes as i64;
    drop(store); // crash: abort stays
    assert!(dir.path().join("abort").exists());
    // torn record: a header claiming 200 bytes followed by a few bytes
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(commitlog_file(dir.path(), 0))
            .unwrap();
        let mut torn = Vec::new();
        torn.extend_from_slice(&200i32.to_be_bytes());
        torn.extend_from_slice(&crate::format::message::MAGIC_V1.to_be_bytes());
        torn.extend_from_slice(&[7u8; 12]);
        f.write_all_at(&torn, end as u64).unwrap();
    }
    // and a dirty CQ unit pointing at it
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join("consumequeue/T/0/00000000000000000000"))
            .unwrap();
        f.write_all_at(
            &CqUnit {
                offset: end,
                size: 200,
                tags_code: 0,
            }
            .encode(),
            5 * 20,
        )
        .unwrap();
    }
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    let rep = store.recovery_report();
    assert!(rep.abnormal);
    assert_eq!(rep.commit_log_end, end);
    assert_eq!(rep.truncated_bytes, 20);
    assert_eq!(rep.cq_truncated_units, 1);
    assert_eq!(store.get_max_offset_in_queue("T", 0).unwrap(), 5);
    assert_eq!(store.max_physical_offset().unwrap(), end);
    let r = put_n(&store, "T", 0, 1, 100, 2);
    assert_eq!((r[0].commitlog_offset, r[0].queue_offset), (end, 5));
    assert_eq!(all(&store, "T", 0, 0, 32).message_count, 6);
}

#[test]
#[cfg(unix)] // writes torn bytes with pwrite (std::os::unix::fs::FileExt)
fn recovery_stops_at_corrupt_crc_in_the_middle() {
    let dir = TempDir::new();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    let res = put_n(&store, "T", 0, 10, 50, 1);
    store.close().unwrap();
    let bad = res[5].commitlog_offset;
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(commitlog_file(dir.path(), 0))
            .unwrap();
        let mut b = [0u8; 1];
        let at = bad as u64 + 84 + 4; // first body byte
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0xFF], at).unwrap();
    }
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    let rep = store.recovery_report();
    assert!(!rep.abnormal);
    assert_eq!(rep.commit_log_end, bad);
    let last_end = res[9].commitlog_offset + res[9].wrote_bytes as i64;
    assert_eq!(rep.truncated_bytes, last_end - bad);
    assert_eq!(rep.cq_truncated_units, 5);
    assert_eq!(store.get_max_offset_in_queue("T", 0).unwrap(), 5);
    assert_eq!(all(&store, "T", 0, 0, 32).message_count, 5);
    store.close().unwrap();
    // with CRC checks off the flipped record is accepted again? No: its bytes were zeroed.
    let cfg = StoreConfig {
        check_crc_on_recover: false,
        ..small_config()
    };
    let store = MessageStore::open(dir.path(), cfg).unwrap();
    assert_eq!(store.recovery_report().commit_log_end, bad);
}

#[test]
fn abnormal_recovery_redispatches() {
    let dir = TempDir::new();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    put_n(&store, "T", 0, 7, 50, 1);
    put_n(&store, "T", 3, 4, 50, 1);
    drop(store);
    std::fs::remove_file(dir.path().join("consumequeue/T/3/00000000000000000000")).unwrap();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    let rep = store.recovery_report();
    assert!(rep.abnormal);
    assert_eq!(rep.redispatched, 4);
    assert_eq!(store.get_max_offset_in_queue("T", 3).unwrap(), 4);
    assert_eq!(store.get_max_offset_in_queue("T", 0).unwrap(), 7);
    assert_eq!(all(&store, "T", 3, 0, 32).message_count, 4);
}

#[test]
fn lock_sync_flush_and_scan() {
    let dir = TempDir::new();
    let cfg = StoreConfig {
        flush_disk_type: FlushDiskType::SyncFlush,
        ..small_config()
    };
    let store = MessageStore::open(dir.path(), cfg.clone()).unwrap();
    assert!(matches!(
        MessageStore::open(dir.path(), cfg.clone()),
        Err(Error::Locked(_))
    ));
    let res = put_n(&store, "T", 0, 250, 1, 1);
    assert!(res.iter().all(|r| r.status == PutMessageStatus::PutOk));
    let codes = [tags_hash("A")];
    let (next, matched) = store
        .scan_consume_queue("T", 0, 0, 1000, Some(&codes))
        .unwrap();
    assert_eq!((next, matched.len()), (250, 125 * 20));
    let (next, matched) = store.scan_consume_queue("T", 0, 10, 100, None).unwrap();
    assert_eq!((next, matched.len()), (110, 100 * 20));
    assert_eq!(store.flush().unwrap(), store.max_physical_offset().unwrap());
    store.close().unwrap();
    let store = MessageStore::open(dir.path(), cfg).unwrap();
    assert_eq!(store.get_max_offset_in_queue("T", 0).unwrap(), 250);
}

#[test]
fn store_reader_reads_what_the_engine_wrote_beside_it() {
    let dir = TempDir::new();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    put_n(&store, "T", 0, 150, 100, 1);
    put_n(&store, "T", 1, 20, 30, 2);
    // the engine holds the lock: the reader needs none
    let reader = StoreReader::open(dir.path(), None, None).unwrap();
    assert_eq!(reader.commit_log_file_size(), Some(4096));
    assert_eq!(reader.consume_queue_file_size(), Some(2000));
    assert_eq!(
        reader.queues(),
        vec![("T".to_string(), 0), ("T".to_string(), 1)]
    );
    assert_eq!(reader.topics(), vec!["T".to_string()]);
    for qid in [0, 1] {
        let max = store.get_max_offset_in_queue("T", qid).unwrap();
        assert_eq!(reader.max_offset("T", qid), max);
        assert_eq!(reader.min_offset("T", qid), 0);
        let mut out = Vec::new();
        let r = reader.read_records("T", qid, 0, max + 3, None, &mut out);
        assert_eq!(
            r,
            ReadRange {
                count: max as usize,
                next_offset: max
            }
        );
        let got = records(&out);
        assert_eq!(
            got.iter().map(|r| r.queue_offset).collect::<Vec<_>>(),
            (0..max).collect::<Vec<_>>()
        );
        for rec in &got {
            let want = store
                .read_commit_log(rec.physical_offset, rec.total_size as i64)
                .unwrap()
                .unwrap();
            assert_eq!(
                reader.record_at(rec.physical_offset).as_deref(),
                Some(want.as_slice())
            );
            assert_eq!(reader.record_at(rec.physical_offset + 1), None);
        }
    }
    // tag filter on the units: only "A" (even flags)
    let a = [tags_hash("A")];
    let mut out = Vec::new();
    let r = reader.read_records("T", 0, 10, 20, Some(&a), &mut out);
    assert_eq!(
        r,
        ReadRange {
            count: 5,
            next_offset: 20
        }
    );
    assert!(records(&out).iter().all(|r| r.flag % 2 == 0));
    // more appended after the reader opened (new files rolled in): seen without reopening
    put_n(&store, "T", 0, 60, 100, 3);
    assert_eq!(reader.max_offset("T", 0), 210);
    let mut out = Vec::new();
    assert_eq!(
        reader.read_records("T", 0, 140, 210, None, &mut out).count,
        70
    );
    // not a store
    let empty = TempDir::new();
    assert!(StoreReader::open(empty.path(), None, None).is_err());
}

fn keyed_props(keys: &str, uniq: &str) -> Vec<u8> {
    let mut v = Vec::new();
    encode_property_into(&mut v, b"KEYS", keys.as_bytes());
    encode_property_into(&mut v, b"UNIQ_KEY", uniq.as_bytes());
    v
}

fn put_keyed(store: &MessageStore, topic: &str, keys: &str, uniq: &str, ts: i64) -> PutResult {
    let p = keyed_props(keys, uniq);
    let m = PutMessage {
        topic,
        body: b"body",
        flag: 0,
        properties: &p,
        queue_id: 0,
        own: None,
    };
    store.put_messages(&[m], &ctx(ts)).unwrap()[0]
}

fn index_files(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(root.join("index"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn index_query_by_key_rolls_files_and_survives_reopen() {
    let dir = TempDir::new();
    let cfg = small_config();
    let store = MessageStore::open(dir.path(), cfg.clone()).unwrap();
    let t0 = 1_700_000_000_000i64;
    let mut offsets = Vec::new();
    for i in 0..10 {
        // 3 keys per record (UNIQ_KEY + 2 KEYS): 7 entries per 8-entry file → several files
        let r = put_keyed(
            &store,
            "T",
            &format!("k{} shared", i % 3),
            &format!("U{i}"),
            t0 + i * 1000,
        );
        offsets.push(r.commitlog_offset);
    }
    assert!(index_files(dir.path()).len() > 3);
    let q = store.query_message("T", "shared", 64, 0, i64::MAX).unwrap();
    assert_eq!(q.count, 10);
    let got: Vec<i64> = records(&q.records)
        .iter()
        .map(|r| r.physical_offset)
        .collect();
    assert_eq!(got, offsets);
    let q = store.query_message("T", "k1", 64, 0, i64::MAX).unwrap();
    assert_eq!(records(&q.records).len(), 3);
    let q = store.query_message("T", "U7", 64, 0, i64::MAX).unwrap();
    assert_eq!(records(&q.records)[0].physical_offset, offsets[7]);
    // other topic, unknown key, time window, max_num
    assert_eq!(
        store
            .query_message("X", "shared", 64, 0, i64::MAX)
            .unwrap()
            .count,
        0
    );
    assert_eq!(
        store
            .query_message("T", "nope", 64, 0, i64::MAX)
            .unwrap()
            .count,
        0
    );
    assert_eq!(
        store
            .query_message("T", "shared", 2, 0, i64::MAX)
            .unwrap()
            .count,
        2
    );
    let q = store
        .query_message("T", "shared", 64, t0 + 5000, t0 + 6000)
        .unwrap();
    assert!(q.count >= 1 && q.count <= 3, "{}", q.count);
    store.close().unwrap();
    let before = index_files(dir.path());
    let store = MessageStore::open(dir.path(), cfg.clone()).unwrap();
    assert_eq!(store.recovery_report().index_rebuilt, 0);
    assert_eq!(
        store
            .query_message("T", "shared", 64, 0, i64::MAX)
            .unwrap()
            .count,
        10
    );
    store.close().unwrap();
    assert_eq!(index_files(dir.path()), before);
    // the same puts into a fresh store give the same bytes (names aside)
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let store = MessageStore::open(dir.path(), cfg).unwrap();
    assert_eq!(store.recovery_report().index_rebuilt, 10);
    store.close().unwrap();
    let rebuilt: Vec<Vec<u8>> = index_files(dir.path()).into_iter().map(|f| f.1).collect();
    let orig: Vec<Vec<u8>> = before.into_iter().map(|f| f.1).collect();
    assert_eq!(rebuilt, orig);
}

#[test]
fn index_corrupt_or_truncated_file_is_refused_and_rebuilt() {
    let dir = TempDir::new();
    let cfg = small_config();
    let store = MessageStore::open(dir.path(), cfg.clone()).unwrap();
    for i in 0..4 {
        put_keyed(&store, "T", "k", &format!("U{i}"), 1_700_000_000_000 + i);
    }
    store.close().unwrap();
    let files = index_files(dir.path());
    let first = dir.path().join("index").join(&files[0].0);
    // truncate the first file
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&first)
        .unwrap();
    f.set_len(30).unwrap();
    drop(f);
    let store = MessageStore::open(dir.path(), cfg.clone()).unwrap();
    // 4 records x 2 keys in 7-entry files: two files, the second follows the refused first one
    assert_eq!(files.len(), 2);
    assert_eq!(store.recovery_report().index_files_refused, 2);
    assert!(store.index_notes()[0].contains("refused"));
    assert_eq!(store.recovery_report().index_rebuilt, 4);
    assert!(dir.path().join("index_refused").join(&files[0].0).exists());
    assert_eq!(
        store
            .query_message("T", "k", 64, 0, i64::MAX)
            .unwrap()
            .count,
        4
    );
    store.close().unwrap();
    // scribble over every entry's offsets: the query serves nothing wrong
    for (name, _) in index_files(dir.path()) {
        let p = dir.path().join("index").join(name);
        let mut b = std::fs::read(&p).unwrap();
        let start = 40 + 16 * 4;
        for i in (start..b.len()).step_by(20) {
            if i + 12 <= b.len() {
                b[i + 4..i + 12].copy_from_slice(&7i64.to_be_bytes());
            }
        }
        std::fs::write(&p, &b).unwrap();
    }
    let store = MessageStore::open(dir.path(), cfg).unwrap();
    // only the last record is found: its entries were not at the index's tail, so open indexed it again
    let q = store.query_message("T", "k", 64, 0, i64::MAX).unwrap();
    assert_eq!(q.count, 1);
    assert_eq!(store.recovery_report().index_rebuilt, 1);
    assert_eq!(records(&q.records)[0].body, b"body");
    store.close().unwrap();
}

#[test]
fn index_disabled_writes_no_index() {
    let dir = TempDir::new();
    let cfg = StoreConfig {
        message_index_enable: false,
        ..small_config()
    };
    let store = MessageStore::open(dir.path(), cfg).unwrap();
    put_keyed(&store, "T", "k", "U", 1_700_000_000_000);
    assert_eq!(
        store
            .query_message("T", "k", 64, 0, i64::MAX)
            .unwrap()
            .count,
        0
    );
    store.close().unwrap();
    assert!(!dir.path().join("index").exists());
}

#[test]
fn replica_append_copies_the_master_and_refuses_gaps() {
    let (dm, ds) = (TempDir::new(), TempDir::new());
    let master = MessageStore::open(dm.path(), small_config()).unwrap();
    let slave = MessageStore::open(ds.path(), small_config()).unwrap();
    put_n(&master, "T", 0, 40, 150, 1_000);
    put_n(&master, "T", 1, 40, 90, 2_000);
    let end = master.max_physical_offset().unwrap();
    assert!(end > 3 * 4096);
    // a gap into an empty store is refused, nothing written
    assert!(matches!(
        slave.append_commit_log(100, b"xx"),
        Err(Error::InvalidArgument(_))
    ));
    let mut off = 0;
    let mut dispatched = Vec::new();
    while let Some(sel) = master.get_commit_log_data(off, 333).unwrap() {
        let data = sel.as_slice().to_vec();
        assert!(data.len() <= 333);
        dispatched.extend(slave.append_commit_log(off, &data).unwrap());
        off += data.len() as i64;
    }
    assert_eq!(off, end);
    assert_eq!(slave.max_physical_offset().unwrap(), end);
    for q in 0..2 {
        assert_eq!(
            slave.get_max_offset_in_queue("T", q).unwrap(),
            master.get_max_offset_in_queue("T", q).unwrap()
        );
        assert_eq!(
            all(&slave, "T", q, 0, 100).body,
            all(&master, "T", q, 0, 100).body
        );
    }
    assert_eq!(dispatched.last().map(|d| d.max_offset), Some(40));
    // an overlap is refused
    assert!(matches!(
        slave.append_commit_log(end - 10, b"x"),
        Err(Error::InvalidArgument(_))
    ));
}

/// Every file under `root` (relative path → bytes), index files in name order with their names dropped (the names
/// are creation times).
type NamedFiles = Vec<(String, Vec<u8>)>;

fn store_image(root: &Path) -> (NamedFiles, Vec<Vec<u8>>) {
    fn walk(base: &Path, dir: &Path, out: &mut NamedFiles) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                if !rel.starts_with("index") && !rel.ends_with("lock") && !rel.ends_with("abort") {
                    out.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
    }
    let mut files = Vec::new();
    walk(root, root, &mut files);
    files.sort();
    let index = index_files(root).into_iter().map(|(_, b)| b).collect();
    (files, index)
}

/// Puts `rounds` batches of `per_batch` keyed messages over 4 queues (UNIQ_KEY + KEYS each, 300-byte bodies).
fn put_keyed_batches(store: &MessageStore, rounds: usize, per_batch: usize) {
    for r in 0..rounds {
        let bodies: Vec<Vec<u8>> = (0..per_batch)
            .map(|i| vec![b'a' + ((r + i) % 26) as u8; 300])
            .collect();
        let ps: Vec<Vec<u8>> = (0..per_batch)
            .map(|i| keyed_props(&format!("k{}", i % 7), &format!("U{r}-{i}")))
            .collect();
        let msgs: Vec<PutMessage> = (0..per_batch)
            .map(|i| PutMessage {
                topic: "Warm",
                body: &bodies[i],
                flag: 0,
                properties: &ps[i],
                queue_id: (i % 4) as i32,
                own: None,
            })
            .collect();
        let res = store
            .put_messages(&msgs, &ctx(1_700_000_000_000 + r as i64))
            .unwrap();
        assert!(res.iter().all(|x| x.status == PutMessageStatus::PutOk));
    }
}

#[test]
fn warm_mapped_file_changes_no_byte() {
    // files big enough that the warm-ahead thread is asked many times inside one batch (every 1 MiB of CommitLog,
    // every 32 KiB of ConsumeQueue units, a new index file several times), small enough that every kind rolls over
    let cfg = |warm: bool| StoreConfig {
        mapped_file_size_commit_log: 3 << 20,
        mapped_file_size_consume_queue: 4000 * 20,
        max_hash_slot_num: 500,
        max_index_num: 6000,
        warm_mapped_file_enable: warm,
        ..StoreConfig::default()
    };
    let (on, off) = (TempDir::new(), TempDir::new());
    for (dir, warm) in [(&on, true), (&off, false)] {
        let store = MessageStore::open(dir.path(), cfg(warm)).unwrap();
        put_keyed_batches(&store, 3, 8000);
        store.close().unwrap();
    }
    let (a, b) = (store_image(on.path()), store_image(off.path()));
    assert!(
        a.0.iter()
            .filter(|(p, _)| p.starts_with("commitlog"))
            .count()
            >= 3
    );
    assert!(a.1.len() >= 8, "index files: {}", a.1.len());
    assert_eq!(a.0.len(), b.0.len());
    for ((pa, ba), (pb, bb)) in a.0.iter().zip(b.0.iter()) {
        assert_eq!(pa, pb);
        if pa != "checkpoint" {
            assert!(ba == bb, "{pa} differs with warm_mapped_file_enable");
        }
    }
    assert!(
        a.1 == b.1,
        "index files differ with warm_mapped_file_enable"
    );
    // reopened with warming on: recovery, a truncation and more puts leave the same bytes as without it
    for (dir, warm) in [(&on, true), (&off, false)] {
        let store = MessageStore::open(dir.path(), cfg(warm)).unwrap();
        put_keyed_batches(&store, 1, 3000);
        assert_eq!(store.delete_commit_log_files_before(3 << 20).unwrap(), 1);
        drop(store); // not closed: stops the threads like a crash
        let store = MessageStore::open(dir.path(), cfg(warm)).unwrap();
        put_keyed_batches(&store, 1, 2000);
        store.close().unwrap();
    }
    let (a, b) = (store_image(on.path()), store_image(off.path()));
    assert_eq!(a.0.len(), b.0.len());
    for ((pa, ba), (pb, bb)) in a.0.iter().zip(b.0.iter()) {
        assert_eq!(pa, pb);
        if pa != "checkpoint" {
            assert!(
                ba == bb,
                "{pa} differs with warm_mapped_file_enable after reopen"
            );
        }
    }
    assert!(a.1 == b.1);
}

/// Keyed messages (UNIQ_KEY `U<batch>-<i>`, KEYS `k<i % 5> all`) put in batches of `per_batch` (one `ctx` per
/// batch), or the same one message per put.
fn put_keyed_in(
    store: &MessageStore,
    batches: std::ops::Range<usize>,
    per_batch: usize,
    one_by_one: bool,
) {
    for r in batches {
        let ps: Vec<Vec<u8>> = (0..per_batch)
            .map(|i| keyed_props(&format!("k{} all", i % 5), &format!("U{r}-{i}")))
            .collect();
        let msgs: Vec<PutMessage> = (0..per_batch)
            .map(|i| PutMessage {
                topic: "B",
                body: b"a body of some bytes",
                flag: 0,
                properties: &ps[i],
                queue_id: (i % 3) as i32,
                own: None,
            })
            .collect();
        let c = ctx(1_700_000_000_000 + r as i64 * 1000);
        if one_by_one {
            for m in &msgs {
                assert_eq!(
                    store.put_messages(&[*m], &c).unwrap()[0].status,
                    PutMessageStatus::PutOk
                );
            }
        } else {
            let res = store.put_messages(&msgs, &c).unwrap();
            assert!(res.iter().all(|x| x.status == PutMessageStatus::PutOk));
        }
    }
}

/// How many of `put_keyed_in`'s UNIQ_KEYs of these batches a query finds (each exactly once).
fn found_uniq_keys(
    store: &MessageStore,
    batches: std::ops::Range<usize>,
    per_batch: usize,
) -> usize {
    let mut n = 0;
    for r in batches {
        for i in 0..per_batch {
            let q = store
                .query_message("B", &format!("U{r}-{i}"), 64, 0, i64::MAX)
                .unwrap();
            n += q.count;
        }
    }
    n
}

#[test]
fn index_built_by_the_builder_thread_is_byte_for_byte_the_inline_one() {
    // batches of 200 go to the builder thread, single puts are indexed inline: the same bytes everywhere
    let cfg = StoreConfig {
        mapped_file_size_commit_log: 64 << 10,
        max_hash_slot_num: 64,
        max_index_num: 500,
        ..StoreConfig::default()
    };
    let (batched, single) = (TempDir::new(), TempDir::new());
    let store = MessageStore::open(batched.path(), cfg.clone()).unwrap();
    put_keyed_in(&store, 0..2, 200, false);
    // a query right after the put finds everything put before it
    assert_eq!(found_uniq_keys(&store, 0..2, 200), 400);
    // a small put while the builder may still hold ranges is queued behind them (CommitLog order)
    put_keyed_in(&store, 2..3, 200, false);
    put_keyed(&store, "B", "k0 all", "single", 1_700_000_009_000);
    assert_eq!(found_uniq_keys(&store, 2..3, 200), 200);
    let q = store.query_message("B", "single", 64, 0, i64::MAX).unwrap();
    assert_eq!(q.count, 1);
    store.close().unwrap();
    let store = MessageStore::open(single.path(), cfg.clone()).unwrap();
    put_keyed_in(&store, 0..3, 200, true);
    put_keyed(&store, "B", "k0 all", "single", 1_700_000_009_000);
    store.close().unwrap();
    let (a, b) = (store_image(batched.path()), store_image(single.path()));
    assert!(a.1.len() >= 4, "index files: {}", a.1.len());
    assert!(a.0 == b.0, "store files differ");
    assert!(a.1 == b.1, "index files differ");
    // reopened: nothing to re-index (close waited for the builder)
    let store = MessageStore::open(batched.path(), cfg).unwrap();
    assert_eq!(store.recovery_report().index_rebuilt, 0);
    store.close().unwrap();
}

#[test]
fn a_dropped_store_loses_no_index_entry_the_next_open_cannot_rebuild() {
    let cfg = StoreConfig {
        mapped_file_size_commit_log: 64 << 10,
        max_hash_slot_num: 64,
        max_index_num: 500,
        ..StoreConfig::default()
    };
    let dir = TempDir::new();
    let store = MessageStore::open(dir.path(), cfg.clone()).unwrap();
    put_keyed_in(&store, 0..3, 300, false);
    drop(store); // like a crash: the builder stops, maybe before it built everything
    let store = MessageStore::open(dir.path(), cfg).unwrap();
    assert_eq!(found_uniq_keys(&store, 0..3, 300), 900);
    store.close().unwrap();
}

/// `flush_commit_log_timed` (4.9.7's `flushCommitLogTimed`, default true): ASYNC_FLUSH puts do not wake the flush
/// thread, the CommitLog waits for the tick; off, 4+ pages appended are msynced by a wake-up well before the tick.
#[test]
fn timed_flush_leaves_the_commit_log_to_the_tick() {
    let flushed_after_puts = |timed: bool| {
        let dir = TempDir::new();
        let cfg = StoreConfig {
            mapped_file_size_commit_log: 1 << 20,
            flush_interval_commit_log_ms: 600_000, // no tick during the test
            flush_commit_log_timed: timed,
            ..StoreConfig::default()
        };
        let store = MessageStore::open(dir.path(), cfg).unwrap();
        // 12 puts of 2 KiB: 24 KiB, past FLUSH_LEAST_PAGES × 4 KiB; one put per call, as a producer's sends
        for i in 0..12 {
            put_n(&store, "T", 0, 1, 2048, 1_000 + i);
        }
        let file = store.inner.commit_log.queue.last().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !timed && file.flushed_position() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(200)); // a wake-up, had one been sent, has run by now
        let flushed = file.flushed_position();
        let wrote = file.wrote_position();
        store.close().unwrap();
        (flushed, wrote)
    };
    let (flushed, wrote) = flushed_after_puts(true);
    assert!(wrote > 16 * 1024);
    assert_eq!(flushed, 0, "timed: nothing msynced before the tick");
    let (flushed, _) = flushed_after_puts(false);
    assert!(
        flushed >= 16 * 1024,
        "untimed: the wake-up msynced {flushed} bytes"
    );
}

/// The tick's ConsumeQueue rule (4.9's FlushConsumeQueueService): a queue with fewer than
/// `FLUSH_CONSUME_QUEUE_LEAST_PAGES` dirty pages waits, one with more is msynced; every queue once the thorough
/// interval has passed, and at an explicit flush.
#[test]
fn the_tick_msyncs_consume_queues_with_two_dirty_pages_and_all_of_them_each_minute() {
    let dir = TempDir::new();
    let cfg = StoreConfig {
        mapped_file_size_commit_log: 4 << 20,
        flush_interval_commit_log_ms: 600_000, // the test runs the ticks itself
        ..StoreConfig::default()
    };
    let store = MessageStore::open(dir.path(), cfg).unwrap();
    put_n(&store, "Cqf", 0, 1, 10, 1_000);
    put_n(&store, "Cqf", 1, 500, 10, 2_000); // 10,000 bytes of units: 2 pages and more
    let flushed = |qid: i32| {
        let q = store.inner.queue("Cqf", qid).unwrap();
        let f = q.queue.last().unwrap();
        (f.flushed_position(), f.wrote_position())
    };
    store.inner.flush_all_inner(false).unwrap();
    assert_eq!(flushed(0), (0, 20), "one unit: left for later");
    assert_eq!(flushed(1), (10_000, 10_000));
    {
        let mut last = store.inner.last_thorough_cq_flush.lock().unwrap();
        *last = last.checked_sub(Duration::from_secs(61)).unwrap();
    }
    store.inner.flush_all_inner(false).unwrap();
    assert_eq!(flushed(0), (20, 20), "the thorough tick msyncs every queue");
    put_n(&store, "Cqf", 0, 1, 10, 3_000);
    store.inner.flush_all_inner(false).unwrap();
    assert_eq!(flushed(0), (20, 40));
    store.flush().unwrap();
    assert_eq!(flushed(0), (40, 40), "an explicit flush msyncs every queue");
    store.close().unwrap();
}

#[test]
fn put_batch_across_a_file_boundary() {
    // 4096-byte CommitLog files: 12 records of ~600 bytes roll over to a next file (a BLANK); the result names each
    let dir = TempDir::new();
    let store = MessageStore::open(dir.path(), small_config()).unwrap();
    let mut body = Vec::new();
    for i in 0..12u8 {
        body.extend(crate::format::batch::block(
            i as i32,
            &[i; 500],
            b"UNIQ_KEY\x01u\x02",
        ));
    }
    let recs = crate::format::batch::BatchRecords::build(
        &body,
        b"CLUSTER\x01c",
        |_: &mut String| -> std::result::Result<bool, ()> { Ok(false) },
    )
    .unwrap()
    .unwrap();
    let r = store.put_batch("TopicB", 1, &recs, &ctx(7), true).unwrap();
    assert_eq!(
        (r.status, r.stored, r.queue_offset),
        (PutMessageStatus::PutOk, 12, 0)
    );
    let got = all(&store, "TopicB", 1, 0, 32);
    let stored = records(&got.body);
    assert_eq!(stored.len(), 12);
    for (i, (rec, off)) in stored.iter().zip(&r.commitlog_offsets).enumerate() {
        assert_eq!(
            (rec.physical_offset, rec.flag, rec.queue_offset),
            (*off, i as i32, i as i64)
        );
        assert_eq!(rec.properties, b"UNIQ_KEY\x01u\x02CLUSTER\x01c");
    }
    let last = stored.last().unwrap();
    assert_eq!(r.end_offset, last.physical_offset + last.total_size as i64);
    assert_eq!(
        r.wrote_bytes,
        stored.iter().map(|x| x.total_size as i64).sum::<i64>()
    );
    assert!(r.end_offset > r.wrote_bytes); // the BLANKs between files are not the records' bytes
    assert_eq!(r.end_offset, store.max_physical_offset().unwrap());
}

#[test]
fn batch_put_result_summarises_the_records() {
    let ok = |clo: i64, qo: i64| PutResult {
        status: PutMessageStatus::PutOk,
        commitlog_offset: clo,
        queue_offset: qo,
        wrote_bytes: 100,
    };
    let failed = |status| PutResult {
        status,
        commitlog_offset: -1,
        queue_offset: -1,
        wrote_bytes: 0,
    };
    let r = BatchPutResult::of(&[ok(0, 5), ok(100, 6)]);
    assert_eq!(
        (
            r.status,
            r.stored,
            r.queue_offset,
            r.wrote_bytes,
            r.end_offset
        ),
        (PutMessageStatus::PutOk, 2, 5, 200, 200)
    );
    // an I/O failure cut the put short: the records before it are stored
    let r = BatchPutResult::of(&[ok(0, 5), failed(PutMessageStatus::CreateMappedFileFailed)]);
    assert_eq!(
        (
            r.status,
            r.stored,
            r.commitlog_offsets.clone(),
            r.end_offset
        ),
        (PutMessageStatus::CreateMappedFileFailed, 1, vec![0], 100)
    );
    // validation refused every record
    let r = BatchPutResult::of(&[failed(PutMessageStatus::MessageIllegal); 3]);
    assert_eq!(
        (r.status, r.stored, r.queue_offset, r.end_offset),
        (PutMessageStatus::MessageIllegal, 0, -1, -1)
    );
    // a flush timeout keeps the records
    let timed_out = PutResult {
        status: PutMessageStatus::FlushDiskTimeout,
        ..ok(0, 0)
    };
    let r = BatchPutResult::of(&[timed_out, timed_out]);
    assert_eq!(
        (r.status, r.stored),
        (PutMessageStatus::FlushDiskTimeout, 2)
    );
}
