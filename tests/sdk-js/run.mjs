// The end of every Node SDK script (realtime_ws.mjs, realtime_ws_moshi.mjs): the checks
// every run makes on the whole event log, and the runner that bounds the scenario, prints
// the figures and the failures, and exits 0 / 1.

import { parseArgs } from 'node:util';

import { Abort, compact, now, sleep } from './checks.mjs';

/**
 * The command line of a WebSocket SDK script (`script`: its file name, for the usage line):
 * `--base-url http://HOST:PORT[/v1] [--dump-events]`. Returns the Realtime WebSocket URL the
 * SDK is given and whether to dump the event log.
 */
export function scriptArgs(script) {
  const { values } = parseArgs({
    options: {
      'base-url': { type: 'string' },
      'dump-events': { type: 'boolean', default: false },
    },
  });
  if (!values['base-url']) {
    console.error(`usage: ${script} --base-url http://127.0.0.1:PORT [--dump-events]`);
    process.exit(2);
  }
  const base = values['base-url'].replace(/\/+$/, '').replace(/\/v1$/, '');
  return {
    wsUrl: `${base.replace(/^http/, 'ws')}/v1/realtime?model=gpt-realtime`,
    dumpEvents: values['dump-events'],
  };
}

/** Whole-run checks: every known event parses, no server `error` event, no SDK error. */
export function checkWholeRun(C, ev, sdkErrors) {
  C.check(ev.problems.length === 0, "every server event parses with the SDK's schema", ev.problems.join('\n    '));
  const errs = ev.errors();
  C.check(errs.length === 0, 'no server error events', errs.map((e) => compact(e)).join('\n    '));
  C.check(sdkErrors.length === 0, 'no SDK errors', sdkErrors.join('\n    '));
}

/**
 * Runs `scenario()` within `timeoutMs`, then prints `C.figures`, the check counts, the event
 * log (on failure or with `dumpEvents`) and the failures; exits 1 if any check failed.
 */
export async function runScenario(scenario, { C, ev, timeoutMs, dumpEvents = false }) {
  const F = C.figures;
  const tStart = now();
  try {
    await Promise.race([
      scenario(),
      sleep(timeoutMs).then(() => {
        throw new Abort(`did not finish within ${timeoutMs} ms`);
      }),
    ]);
  } catch (e) {
    C.check(false, 'scenario', e instanceof Abort ? e.message : e?.stack ?? String(e));
  }
  F.total_s = ((now() - tStart) / 1000).toFixed(1);
  console.log('== summary');
  for (const [k, v] of Object.entries(F)) console.log(`  ${k}: ${v}`);
  console.log(`  checks passed: ${C.passed.length}, failed: ${C.failed.length}`);
  if (C.failed.length || dumpEvents) {
    console.log('== events (ms since connect, type, fields)');
    for (const line of ev.dump()) console.log(line);
  }
  for (const f of C.failed) console.log(`FAIL: ${f}`);
  process.exit(C.failed.length ? 1 : 0);
}
