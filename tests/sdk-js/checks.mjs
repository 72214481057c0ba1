// Shared by the Node scripts and the browser page: a log of the raw server events the SDK
// saw, each checked against the SDK's own zod schemas, plus pass/fail bookkeeping.
//
// agents-realtime parses every server event with `realtimeServerEventSchema` and silently
// demotes one that fails to a "generic" event, which it then ignores. That would hide a
// server bug behind a test that merely times out, so every event is re-parsed here and a
// known type that does not parse is reported with zod's issues.

// Not in the package's export map, so imported by file; esbuild bundles it the same way.
import { realtimeServerEventSchema } from './node_modules/@openai/agents-realtime/dist/openaiRealtimeEvents.mjs';

/** Server event types the SDK has a schema for. */
export const SDK_KNOWN_TYPES = new Set(
  realtimeServerEventSchema.options.map((o) => o.shape.type.value),
);

/** Monotonic milliseconds. */
export const now = () => performance.now();

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Pass/fail bookkeeping: every check is kept; failures are also printed at once. */
export class Checks {
  constructor(log = console.log) {
    this.passed = [];
    this.failed = [];
    this.figures = {};
    this.log = log;
  }
  check(ok, what, detail = '') {
    if (ok) {
      this.passed.push(what);
    } else {
      const msg = detail ? `${what}: ${detail}` : what;
      this.failed.push(msg);
      this.log(`FAIL: ${msg}`);
    }
    return ok;
  }
  note(msg) {
    this.log(`  .. ${msg}`);
  }
}

/** A step cannot go on (an awaited event never came). */
export class Abort extends Error {}

/** Shortens long strings (base64 audio) for printing. */
export function compact(ev, max = 400) {
  const short = (v) => {
    if (typeof v === 'string' && v.length > 60) return `${v.slice(0, 24)}...(${v.length})`;
    if (Array.isArray(v)) return v.map(short);
    if (v && typeof v === 'object') {
      const o = {};
      for (const [k, x] of Object.entries(v)) if (k !== 'event_id') o[k] = short(x);
      return o;
    }
    return v;
  };
  const s = JSON.stringify(short(ev));
  return s.length <= max ? s : `${s.slice(0, max)}...`;
}

/**
 * Every raw server event (from the transport's `*` listener) with its arrival time, checked
 * against the SDK's schema; a cursor-free `waitFor` over the log.
 */
export class EventLog {
  constructor(t0 = now()) {
    this.t0 = t0;
    this.log = []; // [{t, ev}]
    this.problems = []; // schema / shape problems
    this.unknownTypes = new Set();
    this.waiters = new Set();
  }

  record(ev) {
    const t = now();
    if (!ev || typeof ev !== 'object' || typeof ev.type !== 'string') {
      this.problems.push(`not an event object: ${JSON.stringify(ev)?.slice(0, 120)}`);
      return;
    }
    if (!(typeof ev.event_id === 'string' && ev.event_id.startsWith('event_'))) {
      this.problems.push(`${ev.type}: event_id ${JSON.stringify(ev.event_id)}`);
    }
    if (SDK_KNOWN_TYPES.has(ev.type)) {
      const r = realtimeServerEventSchema.safeParse(ev);
      if (!r.success) {
        const issues = r.error.issues
          .slice(0, 4)
          .map((i) => `${i.path.join('.')}: ${i.message}`)
          .join('; ');
        this.problems.push(
          `the SDK's schema rejects ${ev.type} (it would drop it as generic): ${issues}; event ${compact(ev, 300)}`,
        );
      }
    } else {
      this.unknownTypes.add(ev.type);
    }
    this.log.push({ t, ev });
    for (const w of [...this.waiters]) w();
  }

  get length() {
    return this.log.length;
  }

  types(from = 0) {
    return this.log.slice(from).map((e) => e.ev.type);
  }

  /** Events since index `from` matching `type` (and `pred`). */
  since(from, type, pred = () => true) {
    return this.log.slice(from).filter((e) => e.ev.type === type && pred(e.ev));
  }

  find(from, type, pred = () => true) {
    return this.log.slice(from).find((e) => e.ev.type === type && pred(e.ev));
  }

  /** Waits for an event of `type` at index >= `from`; resolves with {t, ev, index}. */
  waitFor(type, { from = 0, pred = () => true, timeout = 10_000 } = {}) {
    return new Promise((resolve, reject) => {
      let scanned = from;
      const tryNow = () => {
        for (; scanned < this.log.length; scanned++) {
          const e = this.log[scanned];
          if (e.ev.type === type && pred(e.ev)) {
            cleanup();
            resolve({ ...e, index: scanned });
            return true;
          }
        }
        return false;
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(
          new Abort(
            `no ${type} within ${timeout} ms; events since: ${JSON.stringify(this.types(from).slice(-25))}`,
          ),
        );
      }, timeout);
      const cleanup = () => {
        clearTimeout(timer);
        this.waiters.delete(tryNow);
      };
      if (!tryNow()) this.waiters.add(tryNow);
    });
  }

  errors() {
    return this.log.filter((e) => e.ev.type === 'error').map((e) => e.ev);
  }

  /** One line per event, ms since t0. */
  dump() {
    return this.log.map((e) => `${(e.t - this.t0).toFixed(1).padStart(9)} ${compact(e.ev)}`);
  }
}

/**
 * Records a RealtimeSession's lifecycle events into `sessionEvents` and keeps its latest
 * history; returns a getter for that history.
 */
export function watchSession(session, sessionEvents) {
  for (const name of ['agent_start', 'agent_end', 'audio_start', 'audio_stopped', 'audio_interrupted']) {
    session.on(name, () => sessionEvents.push({ t: now(), name }));
  }
  let history = [];
  session.on('history_updated', (h) => {
    history = h;
  });
  return () => history;
}
