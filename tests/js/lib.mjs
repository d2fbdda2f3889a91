// Shared harness for the nats.js scenarios run by tests/support/node_js.py.
//
// A scenario script is `node <script>.mjs <server-url> <scenario> [args...]`.
// It connects with the npm `nats` client (v2), runs one named scenario and
// prints exactly one JSON line on stdout: the observations the scenario
// recorded.  Each observation is a step: the step's value (made
// JSON-friendly: bytes become text, dates ISO strings) or, when the client
// threw, `{"error": {...}}` describing the error as the client saw it
// (`code`, the JetStream `err_code`/`description` when there is one, and
// the message).  The Python test asserts on those observations, the same
// assertions for nats-server and trijet.  Anything thrown outside a step is
// a harness failure: it is printed to stderr and the exit status is 1.
//
// Every request uses a short client timeout (JS_TIMEOUT_MS) so that a
// missing server answer becomes a recorded TIMEOUT error, not a hang.

import { connect, StringCodec } from "nats";

export const JS_TIMEOUT_MS = 2000;
const sc = StringCodec();

/** Text of a payload (Uint8Array) or null. */
export function text(data) {
  return data === undefined || data === null ? null : sc.decode(data);
}

/** Bytes of a string. */
export function bytes(s) {
  return sc.encode(s);
}

/** A JSON-friendly description of what a client call threw. */
export function describe(err) {
  const api = err?.api_error;
  const out = { name: err?.name ?? typeof err, code: err?.code ?? null, message: String(err?.message ?? err) };
  if (api) {
    out.err_code = api.err_code ?? null;
    out.status = api.code ?? null;
    out.description = api.description ?? null;
  }
  return out;
}

/** Converts values to something JSON.stringify renders faithfully (class instances become `<Name>`). */
export function plain(v) {
  if (v instanceof Uint8Array) return text(v);
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object") {
    const proto = Object.getPrototypeOf(v);
    if (proto !== Object.prototype && proto !== null) return `<${v.constructor?.name ?? "object"}>`;
    const o = {};
    for (const [k, x] of Object.entries(v)) {
      if (typeof x !== "function") o[k] = plain(x);
    }
    return o;
  }
  return v;
}

/**
 * Runs `fn` and records its value (or the error it threw) under `name`.
 * Returns the raw value, or undefined when it threw.
 */
export async function step(out, name, fn) {
  try {
    const v = await fn();
    out[name] = plain(v === undefined ? null : v);
    return v;
  } catch (err) {
    out[name] = { error: describe(err) };
    return undefined;
  }
}

/** Resolves with `p`'s value, or with `fallback` once `ms` have passed. */
export async function within(p, ms, fallback) {
  let timer;
  const expired = new Promise((resolve) => {
    timer = setTimeout(resolve, ms, fallback);
  });
  try {
    return await Promise.race([p, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Reads an async iterator in the background (so callbacks queued in it, like
 * a KV watcher's initializedFn, run as soon as they are reached) and hands out
 * what arrived: `await c.take(n, ms)` gives the next `n` values, or fewer if
 * the iterator ended or `ms` ran out first.
 */
export class Collector {
  constructor(iter) {
    this.items = [];
    this.taken = 0;
    this.done = false;
    this.error = null;
    this._wake = null;
    (async () => {
      try {
        for await (const v of iter) {
          this.items.push(v);
          this._notify();
        }
      } catch (err) {
        this.error = describe(err);
      } finally {
        this.done = true;
        this._notify();
      }
    })();
  }

  _notify() {
    const w = this._wake;
    this._wake = null;
    if (w) w();
  }

  async take(n, ms = JS_TIMEOUT_MS) {
    const deadline = Date.now() + ms;
    while (this.items.length - this.taken < n && !this.done) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      await within(new Promise((resolve) => (this._wake = resolve)), left);
    }
    const got = this.items.slice(this.taken, this.taken + n);
    this.taken += got.length;
    return got;
  }
}

/** Every value of an iterator that ends by itself; throws if it has not ended within `ms`. */
export async function drainIter(iter, ms = JS_TIMEOUT_MS) {
  const c = new Collector(iter);
  const got = await c.take(Number.MAX_SAFE_INTEGER, ms);
  if (c.error) throw Object.assign(new Error(c.error.message), { code: c.error.code });
  if (!c.done) throw new Error(`iterator did not end within ${ms} ms (after ${got.length} values)`);
  return got;
}

/** A promise and its resolve function. */
export function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/** Stream config without the server-owned `_nats.*` metadata keys. */
export function userConfig(cfg) {
  const out = { ...cfg };
  if (out.metadata) {
    const md = Object.fromEntries(Object.entries(out.metadata).filter(([k]) => !k.startsWith("_nats.")));
    if (Object.keys(md).length) out.metadata = md;
    else delete out.metadata;
  }
  return out;
}

/**
 * Entry point of a scenario script: `await main({name: async (ctx) => {...}})`.
 * `ctx` has `nc`, `js`, `jsm`, `out` (the observations), `args` and `step`.
 */
export async function main(scenarios) {
  const [url, name, ...args] = process.argv.slice(2);
  const fn = scenarios[name];
  if (!url || !fn) {
    process.stderr.write(`usage: <url> <scenario>; scenarios: ${Object.keys(scenarios).join(", ")}\n`);
    process.exit(2);
  }
  const nc = await connect({ servers: url, reconnect: false, timeout: JS_TIMEOUT_MS });
  const out = {};
  let status = 0;
  try {
    const js = nc.jetstream({ timeout: JS_TIMEOUT_MS });
    const jsm = await nc.jetstreamManager({ timeout: JS_TIMEOUT_MS });
    await fn({ nc, js, jsm, out, args, step: (n, f) => step(out, n, f) });
    process.stdout.write(JSON.stringify(out) + "\n");
  } catch (err) {
    process.stderr.write(`scenario ${name} failed: ${err?.stack ?? err}\n`);
    process.stderr.write(`observations so far: ${JSON.stringify(out)}\n`);
    status = 1;
  } finally {
    await nc.close();
  }
  process.exit(status);
}
