// nats.js object store scenarios: `node objstore.mjs <url> <scenario>` prints
// one JSON line of observations (see lib.mjs).  Each scenario uses its own
// store.  Object contents are `pattern(n)` (byte i = (31*i + 7) mod 256) so the
// Python side can recompute sizes and digests.  Scenarios that read objects
// back, list or watch need push/ordered consumers and are kept separate.

import { createHash } from "node:crypto";
import { headers, nanos, StorageType } from "nats";
import { bytes, Collector, main, text, userConfig } from "./lib.mjs";

const CHUNK = 128 * 1024;

/** n deterministic bytes: byte i = (31*i + 7) mod 256. */
function pattern(n) {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (31 * i + 7) & 0xff;
  return out;
}

function sha256(data) {
  return createHash("sha256").update(data).digest("hex");
}

/** A ReadableStream handing out `data` in pieces of `piece` bytes. */
function pieces(data, piece) {
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (at >= data.length) {
        controller.close();
        return;
      }
      controller.enqueue(data.subarray(at, at + piece));
      at += piece;
    },
  });
}

/** ObjectInfo fields the tests compare (mtime and nuid are volatile; `revision` is the meta's seq). */
function info(i) {
  if (i === null || i === undefined) return null;
  const out = {
    name: i.name,
    bucket: i.bucket,
    size: i.size,
    chunks: i.chunks,
    digest: i.digest,
    deleted: i.deleted,
    revision: i.revision,
    description: i.description,
    options: i.options ?? null,
  };
  if (i.metadata && Object.keys(i.metadata).length) out.metadata = i.metadata;
  const h = i.headers;
  if (h && h.keys().length) out.headers = Object.fromEntries(h.keys().map((k) => [k, h.values(k)]));
  return out;
}

function status(s) {
  return {
    bucket: s.bucket,
    description: s.description,
    ttl: s.ttl,
    storage: s.storage,
    replicas: s.replicas,
    sealed: s.sealed,
    size: s.size,
    backingStore: s.backingStore,
    metadata: userConfig({ metadata: s.metadata }).metadata ?? null,
  };
}

/** (messages in the store's stream, messages on its chunk subjects). */
async function counts(jsm, bucket) {
  const si = await jsm.streams.info(`OBJ_${bucket}`, { subjects_filter: `$O.${bucket}.C.>` });
  const onChunks = Object.values(si.state.subjects ?? {}).reduce((a, b) => a + b, 0);
  return [si.state.messages, onChunks];
}

/** The store's raw meta message for `name`: headers and JSON body. */
async function rawMeta(jsm, bucket, name) {
  const raw = Buffer.from(name);
  // the meta token is padded base64url (Go's base64.URLEncoding), Node's base64url is unpadded
  const subj = `$O.${bucket}.M.${raw.toString("base64url")}${"=".repeat((3 - (raw.length % 3)) % 3)}`;
  const m = await jsm.streams.getMessage(`OBJ_${bucket}`, { last_by_subj: subj });
  const h = m.header;
  return {
    subject: m.subject,
    headers: h ? Object.fromEntries(h.keys().map((k) => [k, h.get(k)])) : null,
    body: JSON.parse(text(m.data)),
  };
}

const scenarios = {
  // store options become the stream config; status
  async store({ js, jsm, step }) {
    const os = await step("create", () =>
      js.views.os("js_opts", {
        description: "blobs",
        ttl: nanos(3_600_000),
        storage: StorageType.Memory,
        max_bytes: 1 << 24,
        metadata: { owner: "tests" },
      }),
    );
    await step("config", async () => userConfig((await jsm.streams.info("OBJ_js_opts")).config));
    await step("status", async () => status(await os.status()));
    await step("defaults", async () => {
      await js.views.os("js_dflt");
      return userConfig((await jsm.streams.info("OBJ_js_dflt")).config);
    });
    await step("bad_name", () => js.views.os("bad.name"));
  },

  // multi-chunk put (blob and stream), the meta message it leaves, info
  async put_info({ js, jsm, step }) {
    const os = await js.views.os("js_put");
    const h = headers();
    h.set("Kind", "report");
    const data = pattern(2 * CHUNK + 1000);
    await step("put", async () =>
      info(
        await os.putBlob(
          { name: "reports/q1.bin", description: "first quarter", headers: h, metadata: { year: "2024" } },
          data,
        ),
      ),
    );
    await step("sha256", () => sha256(data));
    await step("info", async () => info(await os.info("reports/q1.bin")));
    await step("meta", async () => {
      const m = await rawMeta(jsm, "js_put", "reports/q1.bin");
      m.body.mtime = typeof m.body.mtime;
      m.body.nuid = typeof m.body.nuid;
      return m;
    });
    await step("counts", () => counts(jsm, "js_put"));
    await step("first_chunk", async () => {
      const m = await jsm.streams.getMessage("OBJ_js_put", { seq: 1 });
      return { subject_prefix: m.subject.slice(0, "$O.js_put.C.".length), size: m.data.length };
    });
    await step("missing", async () => info(await os.info("absent")));
    await step("empty", async () => info(await os.putBlob({ name: "empty" }, null)));
    await step("streamed", async () =>
      info(await os.put({ name: "streamed", options: { max_chunk_size: 1000 } }, pieces(pattern(2500), 700))),
    );
    await step("counts_after", () => counts(jsm, "js_put"));
  },

  // putting the same name again replaces the object and purges its old chunks
  async replace({ js, jsm, step }) {
    const os = await js.views.os("js_repl");
    const first = await os.putBlob({ name: "doc" }, pattern(CHUNK + 1));
    const second = await os.putBlob({ name: "doc" }, pattern(10));
    await step("new_nuid", () => first.nuid !== second.nuid);
    await step("info", async () => info(await os.info("doc")));
    await step("counts", () => counts(jsm, "js_repl"));
  },

  // delete leaves a tombstone meta and purges the chunks
  async delete({ js, jsm, step }) {
    const os = await js.views.os("js_del");
    await os.putBlob({ name: "keep" }, bytes("k"));
    await os.putBlob({ name: "doomed" }, pattern(2 * CHUNK));
    await step("counts_before", () => counts(jsm, "js_del"));
    await step("delete", () => os.delete("doomed"));
    await step("info", async () => info(await os.info("doomed")));
    await step("counts_after", () => counts(jsm, "js_del"));
    await step("keep", async () => (await os.info("keep")).size);
    await step("delete_missing", () => os.delete("never"));
    await step("put_again", async () => (await os.putBlob({ name: "doomed" }, bytes("back"))).size);
    await step("info_again", async () => info(await os.info("doomed")));
  },

  // meta update and rename
  async update({ js, step }) {
    const os = await js.views.os("js_meta");
    await os.putBlob({ name: "a" }, bytes("alpha"));
    await os.putBlob({ name: "b" }, bytes("beta"));
    await step("update", async () => (await os.update("a", { description: "first letter" })).seq);
    await step("info_a", async () => info(await os.info("a")));
    await step("rename_taken", () => os.update("a", { name: "b" }));
    await step("rename", async () => (await os.update("a", { name: "c" })).seq);
    await step("info_old", async () => info(await os.info("a")));
    await step("info_new", async () => info(await os.info("c")));
    await step("update_missing", () => os.update("zz", { description: "x" }));
  },

  // links to an object (same and other store) and to a whole store
  async links({ js, step }) {
    const src = await js.views.os("js_lsrc");
    const dst = await js.views.os("js_ldst");
    const target = await src.putBlob({ name: "target" }, pattern(3000));
    await dst.putBlob({ name: "taken" }, bytes("x"));
    await step("link", async () => info(await dst.link("to_target", target)));
    await step("link_info", async () => {
      const i = await dst.info("to_target");
      return { isLink: i.isLink(), link: i.options.link, size: i.size };
    });
    await step("link_same_store", async () => info(await src.link("alias", target)));
    await step("link_store", async () => info(await dst.linkStore("whole", src)));
    await step("link_taken", () => dst.link("taken", target));
    const link = await dst.info("to_target");
    await step("link_to_link", () => dst.link("second", link));
    await src.delete("alias");
    const deleted = await src.info("alias");
    await step("link_to_deleted", () => dst.link("dead", deleted));
  },

  // seal, then destroy
  async seal_destroy({ js, jsm, step }) {
    const os = await js.views.os("js_seal");
    await os.putBlob({ name: "x" }, bytes("x"));
    await step("seal", async () => (await os.seal()).sealed);
    await step("status_sealed", async () => (await os.status()).sealed);
    await step("put_sealed", () => os.putBlob({ name: "y" }, bytes("y")));
    await step("destroy", () => os.destroy());
    await step("status_gone", () => os.status());
    await step("info_gone", () => jsm.streams.info("OBJ_js_seal"));
  },

  // --- the scenarios below need push/ordered consumers ---

  // read back multi-chunk objects (digest checked by the client)
  async get({ js, step }) {
    const os = await js.views.os("js_get");
    const data = pattern(3 * CHUNK + 7);
    await os.putBlob({ name: "big" }, data);
    await step("big", async () => {
      const got = await os.getBlob("big");
      return { size: got.length, sha256: sha256(got) };
    });
    await step("sha256", () => sha256(data));
    await step("get_stream", async () => {
      const r = await os.get("big");
      let n = 0;
      for await (const piece of r.data) n += piece.length;
      return { size: n, error: (await r.error) ?? null, info: info(r.info) };
    });
    await os.putBlob({ name: "tiny", options: { max_chunk_size: 1 } }, bytes("abc"));
    await step("tiny", async () => text(await os.getBlob("tiny")));
    await os.putBlob({ name: "empty" }, null);
    await step("empty", async () => (await os.getBlob("empty")).length);
    await step("missing", () => os.getBlob("absent"));
    await os.delete("big");
    await step("deleted", () => os.getBlob("big"));
  },

  // reading through links
  async link_get({ js, step }) {
    const src = await js.views.os("js_lgsrc");
    const dst = await js.views.os("js_lgdst");
    const target = await src.putBlob({ name: "target" }, pattern(CHUNK + 5));
    await dst.link("to_target", target);
    await dst.linkStore("whole", src);
    await step("via_link", async () => sha256(await dst.getBlob("to_target")));
    await step("sha256", () => sha256(pattern(CHUNK + 5)));
    await step("bucket_link", () => dst.getBlob("whole"));
  },

  async list({ js, step }) {
    const os = await js.views.os("js_list");
    await step("empty", async () => (await os.list()).map(info));
    for (const name of ["one", "two", "three"]) await os.putBlob({ name }, bytes(name));
    await os.delete("two");
    await step("listed", async () =>
      (await os.list()).map((i) => [i.name, i.size]).sort((a, b) => a[0].localeCompare(b[0])),
    );
  },

  async watch({ js, step }) {
    const os = await js.views.os("js_watch");
    await os.putBlob({ name: "old" }, bytes("o"));
    const all = new Collector(await os.watch({ includeHistory: true }));
    await step("initial", async () => (await all.take(2)).map((i) => (i ? [i.name, i.size] : null)));
    const fresh = new Collector(await os.watch());
    await os.putBlob({ name: "new" }, pattern(CHUNK + 1));
    await os.delete("old");
    await step("changes", async () => (await all.take(2)).map((i) => [i.name, i.deleted, i.size]));
    await step("fresh", async () => (await fresh.take(2)).map((i) => (i ? [i.name, i.deleted] : null)));
    await step("nothing_else", async () => (await all.take(1, 300)).length);
  },
};

await main(scenarios);
