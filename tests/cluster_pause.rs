//! The kill switch across devices (docs/spec.md §28 "holds on every device", §23): two `tabd run`
//! daemons on one vault and three real `nats-server`s; `tabd pause --all` on one device, and
//! neither device runs a slot; `tabd resume` on the other, and the slots run again. Skipped
//! without a `nats-server` unless `TABD_REQUIRE_NATS=1`.

use std::time::Duration;

use serde_json::Value;

use crate::cluster_daemons::Devices;
use crate::support::describe;

const T: Duration = Duration::from_secs(60);
const KEY: &str = "9f1c2e3d4b5a69788796a5b4c3d2e1f0";

/// `device`'s own status (its status.json), or null.
fn status_of(d: &Devices, device: &str) -> Value {
    let path = d
        .root_of(device)
        .join(format!(".tabd/devices/{device}/status.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_default()).unwrap_or(Value::Null)
}

fn paused_everywhere(d: &Devices, devices: &[&str]) -> bool {
    devices.iter().all(|dev| {
        let s = status_of(d, dev);
        s["pauses"].as_array().is_some_and(|p| !p.is_empty())
            && s["pauses"][0]["all"] == true
            && s["pauses"][0]["every_device"] == true
    })
}

#[test]
fn pause_all_on_one_device_holds_on_both() {
    let Some(mut d) = Devices::new("pause_all_on_one_device_holds_on_both", 3, "") else {
        return;
    };
    d.extra = format!("key = \"{KEY}\"\n");
    // Both devices tell the same listener: one push when the pause begins, one when it ends.
    let events = d.v.dir.path().join("events.jsonl");
    let base = std::fs::read_to_string(&d.v.config).unwrap();
    d.v.set_config(&format!(
        "{base}\n[notify]\ncommand = [\"sh\", \"-c\", \"cat >> {}\"]\n",
        events.display()
    ));
    let pushes = || -> Vec<Value> {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    d.v.write(
        "roles/tick.md",
        "---\nskip_unchanged: false\n---\n# Tick\n## Mission\nTick.\n## Schedule\n*/2 * * * * *\n",
    );
    d.start("laptop");
    d.start("desktop");
    let both = ["laptop", "desktop"];
    d.wait(T, "a slot run by a device", || !d.ok_records("tick").is_empty());
    let out =
        d.v.command_on(&d.config_of("laptop"), &d.root_of("laptop"), &["pause", "--all"])
            .output()
            .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("every device of the cluster holds it"),
        "{}",
        describe(&out)
    );
    d.wait(T, "both devices hold the pause", || paused_everywhere(&d, &both));
    // A run that started before the pause reached a device has ended by now (stopped, or done).
    d.wait(T, "no run going on", || d.running("tick").is_none());
    let requests = d.fake.requests().len();
    let skipped = |device: &str| {
        d.records()
            .into_iter()
            .filter(|(dev, r)| dev == device && r["role"] == "tick" && r["ended"] == "paused")
            .count()
    };
    d.wait(T, "slots passed on both devices while paused", || {
        skipped("laptop") >= 2 && skipped("desktop") >= 2
    });
    assert_eq!(d.fake.requests().len(), requests, "neither device ran a slot");
    let out =
        d.v.command_on(&d.config_of("desktop"), &d.root_of("desktop"), &["resume"])
            .output()
            .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    d.wait(T, "both devices let it go", || {
        both.iter()
            .all(|dev| status_of(&d, dev)["pauses"].as_array().is_some_and(Vec::is_empty))
    });
    let ok = d.ok_records("tick").len();
    d.wait(T, "slots run again", || d.ok_records("tick").len() > ok);
    d.wait(T, "the push that it ended", || pushes().len() >= 2);
    let titles: Vec<Value> = pushes().iter().map(|p| p["title"].clone()).collect();
    assert_eq!(
        titles,
        ["tabd: paused", "tabd runs again"],
        "one push each, from one device"
    );
    let daily = d.v.daily();
    for line in [
        "tabd · paused — you paused every role",
        "Tick · skipped — paused",
        "tabd · runs again — you resumed it (`tabd resume` on desktop)",
    ] {
        assert_eq!(
            daily.matches(line).count(),
            1,
            "{line}: once, from one device:\n{daily}"
        );
    }
}
