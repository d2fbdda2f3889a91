// nats.js JetStream scenarios: `node consumers.mjs <url> <scenario>` prints one
// JSON line of observations (see lib.mjs).  The scenarios cover the
// JetStreamManager (streams, consumers, stored messages), publishing with
// dedupe and expectations, pull consumers (fetch, next, consume and every
// kind of ack), ordered consumers (including the client's recreation of a
// consumer deleted under it), legacy push subscriptions and consumer pause.
// Each scenario uses its own stream(s) so scenarios can share a server; only
// fields that do not depend on timing or server identity are recorded.

import { AckPolicy, consumerOpts, ConsumerEvents, createInbox, DeliverPolicy, StorageType } from "nats";
import { bytes, Collector, JS_TIMEOUT_MS, main, text, userConfig, within } from "./lib.mjs";

/** The identity of a JsMsg the tests compare (no timestamps). */
function msg(m) {
  return {
    subject: m.subject,
    data: text(m.data),
    seq: m.seq,
    dseq: m.info.deliverySequence,
    redeliveryCount: m.info.redeliveryCount,
    pending: m.info.pending,
  };
}

/** The counters of a ConsumerInfo that do not depend on timing. */
function counters(ci) {
  return {
    name: ci.name,
    delivered: ci.delivered.consumer_seq,
    delivered_stream: ci.delivered.stream_seq,
    ack_floor: ci.ack_floor.consumer_seq,
    ack_floor_stream: ci.ack_floor.stream_seq,
    num_ack_pending: ci.num_ack_pending,
    num_redelivered: ci.num_redelivered,
    num_waiting: ci.num_waiting,
    num_pending: ci.num_pending,
  };
}

/** Stream state counters. */
function state(si) {
  const s = si.state;
  return { messages: s.messages, bytes: s.bytes, first_seq: s.first_seq, last_seq: s.last_seq, num_deleted: s.num_deleted ?? 0 };
}

/** Every message a (bounded) iterator yields, as `msg()` records, acking when asked. */
async function collect(iter, { ack = false, ms = JS_TIMEOUT_MS * 2 } = {}) {
  const got = [];
  const done = (async () => {
    for await (const m of iter) {
      got.push(msg(m));
      if (ack) m.ack();
    }
  })();
  const finished = await within(done.then(() => true), ms, false);
  return { msgs: got, ended: finished };
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

/** True when an RFC 3339 time from the server is the instant `d` (Go drops trailing zeros of the fraction). */
function sameTime(s, d) {
  return typeof s === "string" && new Date(s).getTime() === d.getTime();
}

async function publishN(js, subject, n, prefix = "m") {
  for (let i = 1; i <= n; i++) await js.publish(subject, bytes(`${prefix}${i}`));
}

const scenarios = {
  // JetStreamManager: streams and consumers CRUD, stored message get/delete, purge
  async manage({ js, jsm, step }) {
    await step("stream_add", async () =>
      userConfig(
        (
          await jsm.streams.add({
            name: "JSM",
            subjects: ["jsm.a.*"],
            storage: StorageType.Memory,
            max_msgs_per_subject: 10,
          })
        ).config,
      ),
    );
    await step("stream_add_again_different", () =>
      jsm.streams.add({ name: "JSM", subjects: ["jsm.other"], storage: StorageType.Memory }),
    );
    await step("stream_update", async () => {
      const si = await jsm.streams.update("JSM", {
        subjects: ["jsm.a.*", "jsm.b"],
        description: "updated",
        max_msgs_per_subject: 10,
      });
      return { subjects: si.config.subjects, description: si.config.description };
    });
    await step("stream_update_storage", () => jsm.streams.update("JSM", { storage: StorageType.File, subjects: ["jsm.a.*"] }));
    await step("stream_info_missing", () => jsm.streams.info("JSM_NOPE"));
    for (const [s, d] of [
      ["jsm.a.x", "x1"],
      ["jsm.a.y", "y1"],
      ["jsm.a.x", "x2"],
      ["jsm.b", "b1"],
      ["jsm.a.y", "y2"],
    ]) {
      await js.publish(s, bytes(d));
    }
    await step("stream_info", async () => state(await jsm.streams.info("JSM")));
    await step("stream_names", async () => {
      const names = [];
      for await (const n of jsm.streams.names("jsm.b")) names.push(n);
      return names;
    });
    await step("stream_list", async () => {
      const found = [];
      for await (const si of jsm.streams.list()) if (si.config.name === "JSM") found.push(state(si));
      return found;
    });
    await step("get_seq", async () => {
      const sm = await jsm.streams.getMessage("JSM", { seq: 3 });
      return { subject: sm.subject, seq: sm.seq, data: text(sm.data) };
    });
    await step("get_last_by_subj", async () => {
      const sm = await jsm.streams.getMessage("JSM", { last_by_subj: "jsm.a.y" });
      return { subject: sm.subject, seq: sm.seq, data: text(sm.data) };
    });
    await step("get_next_by_subj", async () => {
      const sm = await jsm.streams.getMessage("JSM", { seq: 2, next_by_subj: "jsm.a.x" });
      return { subject: sm.subject, seq: sm.seq, data: text(sm.data) };
    });
    await step("delete_msg", () => jsm.streams.deleteMessage("JSM", 2));
    await step("delete_msg_again", () => jsm.streams.deleteMessage("JSM", 2));
    await step("get_deleted", () => jsm.streams.getMessage("JSM", { seq: 2 }));
    await step("delete_msg_noerase", () => jsm.streams.deleteMessage("JSM", 4, false));
    await step("after_delete", async () => state(await jsm.streams.info("JSM")));

    // consumers
    await step("consumer_add", async () =>
      userConfig(
        (
          await jsm.consumers.add("JSM", {
            durable_name: "dur",
            ack_policy: AckPolicy.Explicit,
            filter_subject: "jsm.a.*",
            max_deliver: 5,
            ack_wait: 10_000_000_000,
          })
        ).config,
      ),
    );
    // the same config again: the existing consumer
    await step("consumer_add_same", async () => {
      const ci = await jsm.consumers.add("JSM", {
        durable_name: "dur",
        ack_policy: AckPolicy.Explicit,
        filter_subject: "jsm.a.*",
        max_deliver: 5,
        ack_wait: 10_000_000_000,
      });
      return ci.name;
    });
    await step("consumer_add_conflict", () =>
      jsm.consumers.add("JSM", { durable_name: "dur", ack_policy: AckPolicy.None }),
    );
    await step("consumer_add_named", async () =>
      (await jsm.consumers.add("JSM", { name: "eph", ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.Last })).name,
    );
    await step("consumer_info", async () => counters(await jsm.consumers.info("JSM", "dur")));
    await step("consumer_info_missing", () => jsm.consumers.info("JSM", "nope"));
    await step("consumer_info_no_stream", () => jsm.consumers.info("JSM_NOPE", "dur"));
    await step("consumer_update", async () => {
      const ci = await jsm.consumers.update("JSM", "dur", { description: "changed", max_deliver: 3 });
      return { description: ci.config.description, max_deliver: ci.config.max_deliver, ack_policy: ci.config.ack_policy };
    });
    await step("consumer_update_missing", () => jsm.consumers.update("JSM", "nope", { description: "x" }));
    await step("consumer_list", async () => {
      const l = await jsm.consumers.list("JSM").next();
      return l.map((ci) => ({ name: ci.name, num_pending: ci.num_pending })).sort((a, b) => a.name.localeCompare(b.name));
    });
    await step("consumer_delete", () => jsm.consumers.delete("JSM", "eph"));
    await step("consumer_delete_again", () => jsm.consumers.delete("JSM", "eph"));
    await step("stream_consumers", async () => (await jsm.streams.info("JSM")).state.consumer_count);

    // purge
    await step("purge_filter", async () => (await jsm.streams.purge("JSM", { filter: "jsm.a.x" })).purged);
    await step("purge_keep", async () => {
      await js.publish("jsm.a.k", bytes("k1"));
      await js.publish("jsm.a.k", bytes("k2"));
      return (await jsm.streams.purge("JSM", { keep: 1 })).purged;
    });
    await step("after_purge", async () => state(await jsm.streams.info("JSM")));
    await step("purge_seq", async () => {
      await js.publish("jsm.a.z", bytes("z1"));
      await js.publish("jsm.a.z", bytes("z2"));
      return (await jsm.streams.purge("JSM", { seq: 9, filter: "jsm.a.z" })).purged;
    });
    await step("after_purge_seq", async () => state(await jsm.streams.info("JSM")));
    await step("purge_all", async () => (await jsm.streams.purge("JSM")).purged);
    await step("consumer_after_purge", async () => counters(await jsm.consumers.info("JSM", "dur")));
    await step("stream_delete", () => jsm.streams.delete("JSM"));
    await step("stream_delete_again", () => jsm.streams.delete("JSM"));
  },

  // js.publish: msgID dedupe and the expect options
  async publish({ js, jsm, step }) {
    await jsm.streams.add({ name: "PUB", subjects: ["pub.>"], storage: StorageType.Memory });
    await step("first", () => js.publish("pub.a", bytes("1"), { msgID: "id-1" }));
    await step("dup", () => js.publish("pub.a", bytes("1 again"), { msgID: "id-1" }));
    await step("second", () => js.publish("pub.b", bytes("2"), { msgID: "id-2" }));
    await step("last_msgid_ok", () => js.publish("pub.c", bytes("3"), { msgID: "id-3", expect: { lastMsgID: "id-2" } }));
    await step("last_msgid_bad", () => js.publish("pub.c", bytes("x"), { expect: { lastMsgID: "id-2" } }));
    await step("last_seq_ok", () => js.publish("pub.a", bytes("4"), { expect: { lastSequence: 3 } }));
    await step("last_seq_bad", () => js.publish("pub.a", bytes("x"), { expect: { lastSequence: 3 } }));
    await step("last_msgid_none", () => js.publish("pub.c", bytes("x"), { expect: { lastMsgID: "id-3" } }));
    await step("stream_ok", () => js.publish("pub.d", bytes("5"), { expect: { streamName: "PUB" } }));
    await step("stream_bad", () => js.publish("pub.d", bytes("x"), { expect: { streamName: "OTHER" } }));
    await step("subj_seq_ok", () => js.publish("pub.a", bytes("6"), { expect: { lastSubjectSequence: 4 } }));
    await step("subj_seq_bad", () => js.publish("pub.a", bytes("x"), { expect: { lastSubjectSequence: 3 } }));
    await step("subj_seq_zero_bad", () => js.publish("pub.b", bytes("x"), { expect: { lastSubjectSequence: 0 } }));
    await step("subj_seq_zero_ok", () => js.publish("pub.new", bytes("7"), { expect: { lastSubjectSequence: 0 } }));
    await step("dup_with_expect", () => js.publish("pub.a", bytes("again"), { msgID: "id-4", expect: { lastSequence: 1 } }));
    await step("no_stream", () => js.publish("nostream.x", bytes("x")));
    await step("state", async () => state(await jsm.streams.info("PUB")));
  },

  // pull consumers: fetch, next, consume with ack/nak/working/term/ackAck, redelivery
  async pull({ js, jsm, step }) {
    await jsm.streams.add({ name: "PULL", subjects: ["pull.>"], storage: StorageType.Memory });
    await publishN(js, "pull.a", 5);
    await jsm.consumers.add("PULL", {
      durable_name: "p",
      ack_policy: AckPolicy.Explicit,
      ack_wait: 30_000_000_000,
    });
    const c = await js.consumers.get("PULL", "p");
    await step("get_info", async () => counters(await c.info(true)));
    await step("fetch3", async () => collect(await c.fetch({ max_messages: 3, expires: 1000 }), { ack: true }));
    // asks for more than there is: ends when the request expires
    await step("fetch_rest", async () => collect(await c.fetch({ max_messages: 10, expires: 1000 }), { ack: true }));
    await step("next_empty", async () => {
      const m = await c.next({ expires: 1000 });
      return m === null ? null : msg(m);
    });
    await step("info_after_fetch", async () => counters(await c.info()));
    await publishN(js, "pull.b", 1, "n");
    await step("next", async () => {
      const m = await c.next({ expires: 2000 });
      if (m) m.ack();
      return m === null ? null : msg(m);
    });

    // consume with every ack kind
    await publishN(js, "pull.c", 4, "c");
    await step("consume_acks", async () => {
      const got = [];
      const acks = {};
      const iter = await c.consume({ max_messages: 10, expires: 2000 });
      for await (const m of iter) {
        const r = msg(m);
        got.push(r);
        if (r.data === "c1") acks.ackAck = await m.ackAck();
        else if (r.data === "c2" && r.redeliveryCount === 1) m.nak(300);
        else if (r.data === "c3") {
          m.working();
          m.working();
          m.ack();
        } else if (r.data === "c4") m.term("bad");
        else acks.redelivered = await m.ackAck();
        if (got.length === 5) break;
      }
      return { msgs: got, acks };
    });
    await step("info_after_consume", async () => counters(await c.info()));
    await step("ackAck_twice", async () => {
      await js.publish("pull.d", bytes("d1"));
      const m = await c.next({ expires: 2000 });
      return [await m.ackAck(), await m.ackAck()];
    });

    // a bounded consume: stop() ends the iterator
    await publishN(js, "pull.e", 3, "e");
    await step("consume_stop", async () => {
      const iter = await c.consume({ max_messages: 2, expires: 1000 });
      const got = [];
      const done = (async () => {
        for await (const m of iter) {
          got.push(msg(m).data);
          m.ack();
          if (got.length === 3) iter.stop();
        }
      })();
      const ended = await within(done.then(() => true), 4000, false);
      return { got, ended, closed: (await within(iter.closed(), 1000, "open")) ?? null };
    });

    // nak without delay: immediate redelivery; ack_wait expiry redelivers too
    await jsm.consumers.add("PULL", {
      durable_name: "short",
      ack_policy: AckPolicy.Explicit,
      ack_wait: 1_000_000_000,
      filter_subject: "pull.f",
      max_deliver: 3,
    });
    await js.publish("pull.f", bytes("f1"));
    const s = await js.consumers.get("PULL", "short");
    await step("redeliveries", async () => {
      const seen = [];
      const iter = await s.consume({ max_messages: 5, expires: 1000 });
      const done = (async () => {
        for await (const m of iter) {
          seen.push(msg(m));
          if (seen.length === 1) m.nak();
          // the second delivery is not acked: ack_wait (1 s) redelivers it.
          // ackAck: a plain ack and a later INFO race in both servers
          if (seen.length === 3) {
            await m.ackAck();
            break;
          }
        }
      })();
      await within(done, 5000);
      iter.stop();
      return seen;
    });
    await step("short_info", async () => counters(await s.info()));
    await step("missing_consumer", () => js.consumers.get("PULL", "nope"));
    await step("missing_stream", () => js.consumers.get("PULL_NOPE", "p"));
  },

  // ordered consumers: consume through a server-side delete, fetch, next
  async ordered({ js, jsm, step }) {
    await jsm.streams.add({ name: "ORD", subjects: ["ord.>"], storage: StorageType.Memory });
    await publishN(js, "ord.a", 5, "a");
    const oc = await js.consumers.get("ORD");
    const iter = await oc.consume({ max_messages: 3, expires: 1000 });
    const events = [];
    (async () => {
      for await (const s of await iter.status()) events.push(s.type);
    })().catch(() => {});
    const col = new Collector(iter);
    const first = await col.take(5, 3000);
    await step("first", () => first.map((m) => [m.seq, text(m.data), m.info.deliverySequence]));
    await step("info", async () => {
      const ci = await oc.info(true);
      return {
        ack_policy: ci.config.ack_policy,
        deliver_policy: ci.config.deliver_policy,
        mem_storage: ci.config.mem_storage,
        max_deliver: ci.config.max_deliver,
        num_replicas: ci.config.num_replicas,
        durable: ci.config.durable_name ?? null,
      };
    });
    // delete the server-side consumer under the client, then publish more
    const name = (await oc.info(true)).name;
    await step("delete_server_side", () => jsm.consumers.delete("ORD", name));
    await publishN(js, "ord.b", 4, "b");
    const rest = await col.take(4, 8000);
    await step("after_delete", () => rest.map((m) => [m.seq, text(m.data), m.info.deliverySequence]));
    await step("recreated", () => events.includes(ConsumerEvents.OrderedConsumerRecreated));
    await step("new_name", async () => (await oc.info(true)).name !== name);
    await step("consumer_count", async () => (await jsm.streams.info("ORD")).state.consumer_count);
    await publishN(js, "ord.c", 2, "c");
    await step("more", async () => (await col.take(2, 3000)).map((m) => [m.seq, text(m.data)]));
    iter.stop();

    // ordered fetch: each fetch continues where the last one ended
    const of = await js.consumers.get("ORD", { filterSubjects: "ord.b" });
    await step("fetch1", async () => (await collect(await of.fetch({ max_messages: 3, expires: 1000 }))).msgs.map((m) => [m.seq, m.data]));
    await step("fetch2", async () => (await collect(await of.fetch({ max_messages: 3, expires: 1000 }))).msgs.map((m) => [m.seq, m.data]));
    await step("fetch_filter", async () => (await of.info(true)).config.filter_subject ?? null);

    // ordered next with a start sequence
    const on = await js.consumers.get("ORD", { opt_start_seq: 9, deliver_policy: DeliverPolicy.StartSequence });
    await step("next1", async () => {
      const m = await on.next({ expires: 1000 });
      return m === null ? null : [m.seq, text(m.data)];
    });
    await step("next2", async () => {
      const m = await on.next({ expires: 1000 });
      return m === null ? null : [m.seq, text(m.data)];
    });
    await step("ordered_missing_stream", async () => {
      const x = await js.consumers.get("ORD_NOPE");
      return x === undefined ? null : "<Consumer>";
    });
  },

  // legacy push subscriptions (js.subscribe with consumerOpts)
  async push({ js, jsm, step }) {
    await jsm.streams.add({ name: "PUSH", subjects: ["push.>"], storage: StorageType.Memory });
    await publishN(js, "push.a", 4, "p");
    const opts = consumerOpts();
    opts.durable("pushd");
    opts.deliverTo(createInbox());
    opts.ackExplicit();
    opts.manualAck();
    opts.flowControl();
    opts.idleHeartbeat(500);
    opts.deliverAll();
    const sub = await step("subscribe", () => js.subscribe("push.a", opts));
    if (sub) {
      const col = new Collector(sub);
      await step("initial", async () => {
        const ms = await col.take(4, 3000);
        for (const m of ms) m.ack();
        return ms.map(msg);
      });
      await step("config", async () => {
        const ci = await sub.consumerInfo();
        const cfg = ci.config;
        return {
          durable_name: cfg.durable_name,
          ack_policy: cfg.ack_policy,
          flow_control: cfg.flow_control,
          idle_heartbeat: cfg.idle_heartbeat,
          filter_subject: cfg.filter_subject,
          push_bound: ci.push_bound ?? false,
          deliver_subject_set: typeof cfg.deliver_subject === "string" && cfg.deliver_subject.length > 0,
        };
      });
      await publishN(js, "push.a", 2, "q");
      await step("live", async () => {
        const ms = await col.take(2, 3000);
        for (const m of ms) m.ack();
        return ms.map(msg);
      });
      await step("info", async () => {
        await eventually(async () => (await sub.consumerInfo()).num_ack_pending === 0, 2000);
        return counters(await sub.consumerInfo());
      });
      await step("already_bound", () => js.subscribe("push.a", opts));
      sub.unsubscribe();
    }

    // queue group: two members share the deliveries
    const qopts = () => {
      const o = consumerOpts();
      o.durable("pushq");
      o.deliverGroup("workers");
      o.deliverTo(createInbox());
      o.ackExplicit();
      o.deliverAll();
      return o;
    };
    const q1 = await step("queue_sub1", () => js.subscribe("push.q", qopts()));
    const q2 = await step("queue_sub2", () => js.subscribe("push.q", qopts()));
    if (q1 && q2) {
      const c1 = new Collector(q1);
      const c2 = new Collector(q2);
      await publishN(js, "push.q", 20, "w");
      await step("queue", async () => {
        await eventually(async () => c1.items.length + c2.items.length >= 20, 4000);
        const all = [...c1.items, ...c2.items].map((m) => m.seq).sort((a, b) => a - b);
        return { count: all.length, distinct: new Set(all).size, both: c1.items.length > 0 && c2.items.length > 0 };
      });
      await step("queue_config", async () => {
        // the client acks each message after handing it out: wait for the last acks
        const settled = await eventually(async () => (await jsm.consumers.info("PUSH", "pushq")).num_ack_pending === 0, 2000);
        const ci = await jsm.consumers.info("PUSH", "pushq");
        return { deliver_group: ci.config.deliver_group, settled, delivered: ci.delivered.consumer_seq };
      });
      await step("queue_wrong_group", async () => {
        const o = consumerOpts();
        o.durable("pushq");
        o.queue("others");
        o.deliverAll();
        o.ackExplicit();
        return js.subscribe("push.q", o);
      });
      q1.unsubscribe();
      q2.unsubscribe();
    }

    // an ephemeral push consumer with a subject filter, auto-acked by the client
    await step("ephemeral", async () => {
      const o = consumerOpts();
      o.deliverTo(createInbox());
      o.ackExplicit();
      o.deliverAll();
      o.maxMessages(4);
      const s = await js.subscribe("push.a", o);
      const got = [];
      for await (const m of s) got.push(m.seq);
      return got;
    });
  },

  // pause and resume a pull consumer
  async pause({ js, jsm, step }) {
    await jsm.streams.add({ name: "PAUSE", subjects: ["pause.>"], storage: StorageType.Memory });
    await publishN(js, "pause.a", 3, "x");
    await jsm.consumers.add("PAUSE", { durable_name: "pz", ack_policy: AckPolicy.Explicit });
    const until = new Date(Date.now() + 60_000);
    await step("pause", async () => {
      const r = await jsm.consumers.pause("PAUSE", "pz", until);
      return { paused: r.paused, pause_until: sameTime(r.pause_until, until), remaining: r.pause_remaining > 50e9 };
    });
    await step("info_paused", async () => {
      const ci = await jsm.consumers.info("PAUSE", "pz");
      return {
        paused: ci.paused ?? false,
        remaining: ci.pause_remaining > 50e9 && ci.pause_remaining <= 60e9,
        config_pause_until: sameTime(ci.config.pause_until, until),
      };
    });
    const c = await js.consumers.get("PAUSE", "pz");
    await step("fetch_paused", async () => (await collect(await c.fetch({ max_messages: 3, expires: 1000 }))).msgs.length);
    await step("info_still_paused", async () => {
      const ci = await jsm.consumers.info("PAUSE", "pz");
      return { paused: ci.paused ?? false, delivered: ci.delivered.consumer_seq, num_pending: ci.num_pending };
    });
    // a waiting pull is served once the consumer resumes
    const waiting = await c.fetch({ max_messages: 3, expires: 3000 });
    const col = new Collector(waiting);
    await step("waiting", () =>
      eventually(async () => (await jsm.consumers.info("PAUSE", "pz")).num_waiting === 1, 2000),
    );
    await step("resume", async () => {
      const r = await jsm.consumers.resume("PAUSE", "pz");
      return { paused: r.paused, pause_until: r.pause_until ?? null };
    });
    await step("after_resume", async () => {
      const ms = await col.take(3, 3000);
      for (const m of ms) m.ack();
      return ms.map((m) => [m.seq, text(m.data)]);
    });
    await step("info_resumed", async () => {
      const ci = await jsm.consumers.info("PAUSE", "pz");
      return { paused: ci.paused ?? false, pause_remaining: ci.pause_remaining ?? null, pause_until: ci.config.pause_until ?? null };
    });
    // a pause in the past resumes at once; pause on a missing consumer fails
    await step("pause_past", async () => {
      const r = await jsm.consumers.pause("PAUSE", "pz", new Date(Date.now() - 1000));
      return { paused: r.paused };
    });
    // Go clients resume with Go's zero time
    await step("pause_go_zero", async () => {
      await jsm.consumers.pause("PAUSE", "pz", until);
      const r = await jsm.consumers.pause("PAUSE", "pz", new Date("0001-01-01T00:00:00Z"));
      const ci = await jsm.consumers.info("PAUSE", "pz");
      return { paused: r.paused, pause_until: r.pause_until, info_paused: ci.paused ?? false, config: ci.config.pause_until ?? null };
    });
    await step("pause_missing", () => jsm.consumers.pause("PAUSE", "nope", until));
    // a consumer created paused (pause_until in the config), resuming by itself
    const soon = new Date(Date.now() + 1500);
    await step("create_paused", async () => {
      const ci = await jsm.consumers.add("PAUSE", {
        durable_name: "pz2",
        ack_policy: AckPolicy.Explicit,
        pause_until: soon.toISOString(),
      });
      return { paused: ci.paused ?? false, pause_until: sameTime(ci.config.pause_until, soon) };
    });
    const c2 = await js.consumers.get("PAUSE", "pz2");
    await step("auto_resume", async () => {
      const t0 = Date.now();
      const m = await c2.next({ expires: 4000 });
      const waited = Date.now() - t0;
      return { seq: m?.seq ?? null, held: waited >= 700 };
    });
    await step("info_auto_resumed", async () => (await jsm.consumers.info("PAUSE", "pz2")).paused ?? false);
  },
};

await main(scenarios);
