//! The warm-ahead thread (`warm_mapped_file_enable`) starts with the store and is gone after `close` or a drop.
//! One test in its own binary (its own process), so no other test's store adds threads while it counts them.

use std::path::{Path, PathBuf};

use rmq_store::format::message::encode_property_into;
use rmq_store::{Host, MessageStore, PutContext, PutMessage, PutMessageStatus, StoreConfig};

fn warm_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter(|e| {
                let comm = e.as_ref().unwrap().path().join("comm");
                std::fs::read_to_string(comm).is_ok_and(|c| c.trim() == "rmq-store-warm")
            })
            .count()
        })
        .unwrap_or(0)
}

fn put(store: &MessageStore, n: usize) {
    let body = vec![7u8; 1000];
    let mut props = Vec::new();
    encode_property_into(&mut props, b"KEYS", b"k");
    let msgs: Vec<PutMessage> = (0..n)
        .map(|i| PutMessage {
            topic: "Warm",
            body: &body,
            flag: 0,
            properties: &props,
            queue_id: (i % 2) as i32,
            own: None,
        })
        .collect();
    let ctx = PutContext {
        sys_flag: 0,
        born_timestamp: 1,
        born_host: Host::parse("127.0.0.1", 1).unwrap(),
        reconsume_times: 0,
        store_timestamp: 1,
        prepared_transaction_offset: 0,
    };
    let res = store.put_messages(&msgs, &ctx).unwrap();
    assert!(res.iter().all(|r| r.status == PutMessageStatus::PutOk));
}

#[test]
fn warm_thread_stops_on_close_and_on_drop() {
    if !Path::new("/proc/self/task").exists() {
        return; // not Linux: no per-thread names to count
    }
    let dir: PathBuf = std::env::temp_dir().join(format!("rmq-warm-thread-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(warm_threads(), 0);
    let store = MessageStore::open(&dir, StoreConfig::default()).unwrap();
    // the thread names itself once it runs
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while warm_threads() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(warm_threads(), 1);
    put(&store, 4000); // 4 MB written, an 8 MiB window asked for: warming may still run at close
    store.close().unwrap();
    assert_eq!(warm_threads(), 0);
    let store = MessageStore::open(&dir, StoreConfig::default()).unwrap();
    put(&store, 100);
    drop(store); // not closed (a crash for the files): the thread is stopped all the same
    assert_eq!(warm_threads(), 0);
    let off = StoreConfig {
        warm_mapped_file_enable: false,
        ..StoreConfig::default()
    };
    let store = MessageStore::open(&dir, off).unwrap();
    put(&store, 100);
    assert_eq!(warm_threads(), 0);
    store.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
