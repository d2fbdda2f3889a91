// nats.js scenarios on a three-node cluster whose leader is killed in the
// middle: `node cluster.mjs <url> <scenario>` (see lib.mjs for the output).
//
// Each scenario works against an R3 asset, then prints one line
// `{"ready": {"stream": ..., "leader": ...}}` and waits for one line on
// stdin: the Python test moves the lead off the client's node if needed,
// SIGKILLs the stream's leader and writes "go".  The scenario then carries on
// through the election (calls retried within a bound) and prints its
// observations as usual.

import { createHash } from "node:crypto";
import { createInterface } from "node:readline";
import { StorageType } from "nats";
import { bytes, Collector, drainIter, main, text } from "./lib.mjs";

const RETRY_MS = 30_000;

/** `await fn()` until it does not throw, for at most RETRY_MS (an election). */
async function retry(fn) {
  const deadline = Date.now() + RETRY_MS;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() >= deadline) throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Reports the stream's leader and waits for the test's "go" line. */
async function handshake(jsm, stream) {
  const si = await retry(() => jsm.streams.info(stream));
  process.stdout.write(JSON.stringify({ ready: { stream, leader: si.cluster?.leader ?? null } }) + "\n");
  const rl = createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (line.trim() === "go") break;
  }
  rl.close();
}

function entry(e) {
  if (e === null || e === undefined) return null;
  return { key: e.key, value: text(e.value), revision: e.revision, operation: e.operation };
}

/** `n` bytes of a repeating, position-dependent pattern. */
function pattern(n, salt) {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + salt + (i >> 12)) & 0xff;
  return b;
}

function sha(b) {
  return createHash("sha256").update(b).digest("hex");
}

const scenarios = {
  // KV with replicas 3: create, put, CAS, delete, purge, keys, history and a
  // watch that keeps running across the kill of the stream's leader
  async kv({ js, jsm, step }) {
    const kv = await step("create", () => js.views.kv("jsr3", { history: 5, replicas: 3 }));
    await step("replicas", async () => (await kv.status()).replicas);
    const r1 = await step("put", () => kv.put("a", bytes("1")));
    await step("update", () => kv.update("a", bytes("2"), r1));
    await step("stale_update", () => kv.update("a", bytes("x"), r1));
    await step("create_existing", () => kv.create("a", bytes("x")));
    await kv.put("b", bytes("b1"));
    await kv.put("c", bytes("c1"));
    const w = new Collector(await kv.watch({ include: "updates" }));
    await kv.put("w", bytes("before"));
    await step("watch_before", async () => (await w.take(1, 5000)).map(entry));
    await handshake(jsm, "KV_jsr3");
    await step("get_after", async () => entry(await retry(() => kv.get("a"))));
    const cur = (await kv.get("a")).revision;
    await step("update_after", () => retry(() => kv.update("a", bytes("3"), cur)));
    await step("stale_after", () => kv.update("a", bytes("y"), cur));
    await step("delete", () => retry(() => kv.delete("b")));
    await step("purge", () => retry(() => kv.purge("c")));
    await step("put_after", () => retry(() => kv.put("w", bytes("after"))));
    await step("keys", async () => (await retry(async () => drainIter(await kv.keys(), 5000))).sort());
    await step("history", async () =>
      (await retry(async () => drainIter(await kv.history({ key: "a" }), 5000))).map(entry),
    );
    await step("watch_after", async () => (await w.take(4, 20000)).map(entry));
  },

  // object store with replicas 3: a 10 MB object put before the kill is read
  // back after it, and another is put and read after it
  async obj({ js, jsm, step }) {
    // nats.js 2.29 copies `replicas` into the stream config as an unknown field
    // (nats-server refuses it with 10025) and forces num_replicas to 1 without it:
    // the store's stream is made as nats.js would make it, with num_replicas 3
    await jsm.streams.add({
      name: "OBJ_jsr3o",
      subjects: ["$O.jsr3o.C.>", "$O.jsr3o.M.>"],
      num_replicas: 3,
      allow_direct: true,
      allow_rollup_hdrs: true,
      discard: "new",
      max_age: 0,
    });
    const os = await step("create", () => js.views.os("jsr3o"));
    await step("replicas", async () => (await os.status()).replicas);
    const big = pattern(10 * 1024 * 1024, 7);
    await step("put", async () => (await os.putBlob({ name: "big" }, big)).size);
    await handshake(jsm, "OBJ_jsr3o");
    await step("get_after", async () => {
      const got = await retry(() => os.getBlob("big"));
      return { size: got.length, same: sha(got) === sha(big) };
    });
    const big2 = pattern(10 * 1024 * 1024, 99);
    await step("put_after", async () => (await retry(() => os.putBlob({ name: "big2" }, big2))).size);
    await step("get2", async () => {
      const got = await retry(() => os.getBlob("big2"));
      return { size: got.length, same: sha(got) === sha(big2) };
    });
    await step("list", async () => (await os.list()).map((i) => i.name).sort());
  },

  // an ordered consumer (consume) reads on through the kill: no gap, no duplicate
  async ordered({ js, jsm, step }) {
    await jsm.streams.add({ name: "JSO", subjects: ["jso.>"], num_replicas: 3, storage: StorageType.File });
    for (let i = 0; i < 50; i++) await js.publish("jso.a", bytes(`m${i}`));
    const oc = await js.consumers.get("JSO");
    const col = new Collector(await oc.consume({ max_messages: 20, expires: 2000 }));
    const first = await col.take(50, 10000);
    await handshake(jsm, "JSO");
    for (let i = 50; i < 100; i++) await retry(() => js.publish("jso.a", bytes(`m${i}`)));
    const rest = await col.take(50, 40000);
    await step("seqs", () => [...first, ...rest].map((m) => m.seq));
    await step("data_ok", () => [...first, ...rest].every((m, i) => text(m.data) === `m${i}`));
  },
};

await main(scenarios);
