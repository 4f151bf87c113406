import type { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import {
  type AnyEvent,
  callIdOf,
  digestOf,
  fingerprintOf,
  keyedDigestOf,
  runStreamId,
} from "../../src/events/index.js";
import { CURRENT_RUN_MACHINE } from "../../src/machines/index.js";

const admitted = (key: Uint8Array, runId: string, chatId: string): AnyEvent => ({
  type: "run.admitted",
  runId,
  chatId,
  inputId: `input-${runId}`,
  inputDigest: keyedDigestOf(key, { content: { runId } }),
  agent: { name: "many", version: "1" },
  machine: CURRENT_RUN_MACHINE,
  input: { runId },
});

const intended = (key: Uint8Array, runId: string, seq: number): AnyEvent => {
  const callId = callIdOf(runId, seq);
  const args = { seq };
  return {
    type: "call.intended",
    runId,
    callId,
    seq,
    attempt: 1,
    kind: "tool",
    name: "noop",
    args,
    fingerprint: fingerprintOf(key, { kind: "tool", name: "noop", args }),
    disposition: "hold",
    pin: null,
    reconciler: null,
    idempotencyKey: `${callId}#1`,
  };
};

const completed = (runId: string, seq: number): AnyEvent => ({
  type: "call.completed",
  runId,
  callId: callIdOf(runId, seq),
  attempt: 1,
  result: { seq },
  resultDigest: digestOf({ seq }),
});

/**
 * Runs written straight through the journal (its chain, admissions, guard and inline projections),
 * without an agent: `finished` completed runs of `calls` calls each, spread over `chats` chats so a
 * chat's row is touched again by its later runs, then one run left open with a call in doubt.
 * Run and chat ids start with `prefix` (default `many` and `chat`: `many-0`, `chat-0`, `many-open`).
 */
export const writeManyRuns = async (
  journal: LibsqlJournal,
  options: {
    readonly finished: number;
    readonly calls: number;
    readonly chats: number;
    readonly prefix?: string;
  },
): Promise<{ readonly openRunId: string }> => {
  const key = journal.fingerprintKey;
  const runPrefix = options.prefix ?? "many";
  const chatPrefix = options.prefix === undefined ? "chat" : `${options.prefix}-chat`;
  for (let n = 0; n < options.finished; n++) {
    const runId = `${runPrefix}-${n}`;
    const events: AnyEvent[] = [admitted(key, runId, `${chatPrefix}-${n % options.chats}`)];
    for (let seq = 0; seq < options.calls; seq++)
      events.push(intended(key, runId, seq), completed(runId, seq));
    events.push({ type: "run.completed", runId, output: n, outputDigest: digestOf(n) });
    await journal.append({ streamId: runStreamId(runId), expectedVersion: "no-stream", events });
  }
  const openRunId = `${runPrefix}-open`;
  await journal.append({
    streamId: runStreamId(openRunId),
    expectedVersion: "no-stream",
    events: [admitted(key, openRunId, `${chatPrefix}-open`), intended(key, openRunId, 0)],
  });
  return { openRunId };
};
