// nats.js KV scenarios: `node kv.mjs <url> <scenario>` prints one JSON line of
// observations (see lib.mjs).  Each scenario uses its own bucket so scenarios
// can share a server.  Scenarios that need push/ordered consumers (keys,
// history, watch*) are separate so a server without them fails narrowly.

import { StorageType } from "nats";
import { bytes, Collector, deferred, drainIter, JS_TIMEOUT_MS, main, text, userConfig, within } from "./lib.mjs";

/** The fields of a KvEntry the tests compare (created is volatile). */
function entry(e) {
  if (e === null || e === undefined) return null;
  return { key: e.key, value: text(e.value), revision: e.revision, operation: e.operation };
}

/** Status fields that do not depend on timing. */
function status(s) {
  return {
    bucket: s.bucket,
    values: s.values,
    history: s.history,
    ttl: s.ttl,
    backingStore: s.backingStore,
    storage: s.storage,
    replicas: s.replicas,
    description: s.description,
    maxValueSize: s.maxValueSize,
    max_bytes: s.max_bytes,
    compression: s.compression,
    streamName: s.streamInfo.config.name,
  };
}

/** Resolves true once `check()` holds, polling every 25 ms for at most `ms`. */
async function eventually(check, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
}

const scenarios = {
  // bucket creation with every option the KV view maps to a stream setting
  async bucket({ js, jsm, step }) {
    const kv = await step("create", async () => {
      const b = await js.views.kv("js_cfg", {
        history: 5,
        ttl: 60_000,
        maxValueSize: 1024,
        max_bytes: 1 << 20,
        storage: StorageType.Memory,
        description: "settings",
        metadata: { owner: "tests" },
        compression: true,
      });
      return b;
    });
    await step("config", async () => userConfig((await jsm.streams.info("KV_js_cfg")).config));
    await step("put", () => kv.put("a", bytes("1")));
    await step("status", async () => status(await kv.status()));
    // binding again finds the stream (INFO) and does not re-create it
    await step("again", async () => status(await (await js.views.kv("js_cfg")).status()));
    await step("defaults", async () => {
      await js.views.kv("js_dflt");
      return userConfig((await jsm.streams.info("KV_js_dflt")).config);
    });
    await step("bad_bucket", () => js.views.kv("no.dots"));
  },

  // put, create, update (CAS by revision), get latest and by revision
  async crud({ js, step }) {
    const kv = await js.views.kv("js_crud", { history: 10 });
    await step("put1", () => kv.put("k", bytes("v1")));
    await step("put2", () => kv.put("k", bytes("v2")));
    await step("create_exists", () => kv.create("k", bytes("x")));
    await step("create_new", () => kv.create("n", bytes("fresh")));
    await step("update_stale", () => kv.update("k", bytes("x"), 1));
    await step("update_ok", () => kv.update("k", bytes("v3"), 2));
    await step("put_prev_stale", () => kv.put("k", bytes("x"), { previousSeq: 2 }));
    await step("get", async () => entry(await kv.get("k")));
    await step("get_rev1", async () => entry(await kv.get("k", { revision: 1 })));
    await step("get_rev_other_key", async () => entry(await kv.get("k", { revision: 3 })));
    await step("get_missing", async () => entry(await kv.get("nope")));
    await step("get_rev_missing", async () => entry(await kv.get("k", { revision: 99 })));
    await step("bad_key", () => kv.put("bad key", bytes("x")));
  },

  // delete and purge markers as get sees them; create over a deleted key
  async markers({ js, step }) {
    const kv = await js.views.kv("js_mark", { history: 10 });
    await step("put_a", () => kv.put("a", bytes("1")));
    await step("put_a2", () => kv.put("a", bytes("2")));
    await step("put_b", () => kv.put("b", bytes("1")));
    await step("delete_a_stale", () => kv.delete("a", { previousSeq: 1 }));
    await step("delete_a", () => kv.delete("a"));
    await step("get_a", async () => entry(await kv.get("a")));
    await step("get_a_rev2", async () => entry(await kv.get("a", { revision: 2 })));
    await step("purge_b", () => kv.purge("b"));
    await step("get_b", async () => entry(await kv.get("b")));
    await step("status_values", async () => (await kv.status()).values);
    await step("recreate_a", () => kv.create("a", bytes("again")));
    await step("get_a_again", async () => entry(await kv.get("a")));
  },

  // history limit and value size limit
  async limits({ js, step }) {
    const kv = await js.views.kv("js_lim", { history: 2, maxValueSize: 16 });
    for (let i = 1; i <= 3; i++) await step(`put${i}`, () => kv.put("k", bytes(`v${i}`)));
    await step("get_rev1", async () => entry(await kv.get("k", { revision: 1 })));
    await step("get_rev2", async () => entry(await kv.get("k", { revision: 2 })));
    await step("too_big", () => kv.put("k", bytes("x".repeat(17))));
    await step("values", async () => (await kv.status()).values);
    const small = await js.views.kv("js_lim_bytes", { max_bytes: 200 });
    await step("fill", () => small.put("k", bytes("x".repeat(100))));
    await step("over_max_bytes", () => small.put("k2", bytes("x".repeat(100))));
  },

  // a bucket sourcing another (subjects rewritten by a transform) and a mirror of it
  async replicated({ js, jsm, step }) {
    const src = await js.views.kv("js_src", { history: 3 });
    await src.put("a", bytes("1"));
    await src.put("b", bytes("2"));
    await src.put("a", bytes("3"));
    const agg = await js.views.kv("js_agg", { sources: [{ name: "js_src" }] });
    await step("agg_sources", async () => (await jsm.streams.info("KV_js_agg")).config.sources);
    await step("agg_synced", () =>
      eventually(async () => (await jsm.streams.info("KV_js_agg")).state.messages === 2, 5000),
    );
    await step("agg_get", async () => entry(await agg.get("a")));
    await step("agg_get_b", async () => entry(await agg.get("b")));
    const mir = await js.views.kv("js_mir", { mirror: { name: "js_src" } });
    await step("mir_config", async () => {
      const c = (await jsm.streams.info("KV_js_mir")).config;
      return { mirror: c.mirror, mirror_direct: c.mirror_direct, subjects: c.subjects ?? null };
    });
    await step("mir_synced", async () => {
      const ok = await eventually(async () => (await jsm.streams.info("KV_js_mir")).state.last_seq === 3, 5000);
      const st = (await jsm.streams.info("KV_js_mir")).state;
      return { ok, messages: st.messages, last_seq: st.last_seq };
    });
    await step("mir_put", () => mir.put("c", bytes("x")));
  },

  // bucket TTL: a value disappears once it is older than the TTL
  async ttl({ js, step }) {
    const kv = await js.views.kv("js_ttl", { ttl: 500 });
    await step("put", () => kv.put("k", bytes("short")));
    await step("get_now", async () => entry(await kv.get("k")));
    await step("expired", () => eventually(async () => (await kv.get("k")) === null, 5000));
    await step("values", async () => (await kv.status()).values);
  },

  // bucket deletion
  async destroy({ js, jsm, step }) {
    const kv = await js.views.kv("js_gone");
    await step("put", () => kv.put("k", bytes("v")));
    await step("destroy", () => kv.destroy());
    await step("info_after", () => jsm.streams.info("KV_js_gone"));
  },

  // --- the scenarios below need push/ordered consumers ---

  async keys({ js, step }) {
    const kv = await js.views.kv("js_keys");
    await step("empty", async () => (await drainIter(await kv.keys())).sort());
    for (const k of ["a", "b.c", "b.d", "e"]) await kv.put(k, bytes(k));
    await kv.put("a", bytes("again"));
    await kv.delete("e");
    await step("all", async () => (await drainIter(await kv.keys())).sort());
    await step("filtered", async () => (await drainIter(await kv.keys("b.*"))).sort());
  },

  async history({ js, step }) {
    const kv = await js.views.kv("js_hist", { history: 3 });
    for (let i = 1; i <= 4; i++) await kv.put("k", bytes(`v${i}`));
    await kv.delete("k");
    await kv.put("other", bytes("o"));
    await step("k", async () => (await drainIter(await kv.history({ key: "k" }))).map(entry));
    await step("all", async () => (await drainIter(await kv.history())).map(entry));
  },

  // watch with the last values first, then live updates
  async watch({ js, step }) {
    const kv = await js.views.kv("js_watch", { history: 5 });
    await kv.put("a", bytes("a1"));
    await kv.put("a", bytes("a2"));
    await kv.put("b", bytes("b1"));
    const init = deferred();
    const w = new Collector(await kv.watch({ initializedFn: () => init.resolve(true) }));
    await step("initial", async () => (await w.take(2)).map(entry));
    await step("initialized", () => within(init.promise, JS_TIMEOUT_MS, false));
    await kv.put("c", bytes("c1"));
    await kv.delete("a");
    await kv.purge("b");
    await step("updates", async () => (await w.take(3)).map(entry));
  },

  // watch with history replays every kept revision of the key, then live updates
  async watch_history({ js, step }) {
    const kv = await js.views.kv("js_watchh", { history: 5 });
    await kv.put("a", bytes("a1"));
    await kv.put("a", bytes("a2"));
    await kv.put("z", bytes("z1"));
    const w = new Collector(await kv.watch({ key: "a", include: "history" }));
    await step("initial", async () => (await w.take(2)).map(entry));
    await kv.put("z", bytes("not watched"));
    await kv.put("a", bytes("a3"));
    await step("updates", async () => (await w.take(1)).map(entry));
    await step("nothing_else", async () => (await w.take(1, 300)).map(entry));
  },

  // updates-only watch skips what is already there
  async watch_updates({ js, step }) {
    const kv = await js.views.kv("js_watchu");
    await kv.put("a", bytes("old"));
    const init = deferred();
    const w = new Collector(await kv.watch({ include: "updates", initializedFn: () => init.resolve(true) }));
    await step("initialized", () => within(init.promise, JS_TIMEOUT_MS, false));
    await kv.put("a", bytes("new"));
    await kv.put("b", bytes("b"));
    await step("updates", async () => (await w.take(2)).map(entry));
  },
};

await main(scenarios);
