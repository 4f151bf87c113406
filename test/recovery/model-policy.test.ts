import { describe, expect, it } from "vitest";
import { type EventOf, makeMasker } from "../../src/events/index.js";
import { CURRENT_RUN_MACHINE, contextOf, foldRun } from "../../src/machines/index.js";
import { classifyInDoubt } from "../../src/runtime/recover.js";

const runId = "r1";
const callId = `${runId}/0`;
const digest = "a".repeat(64);

/** A run whose first call, a model call with this disposition, was left in doubt. */
const inDoubtModelCall = (disposition: "hold" | "replay") => {
  const intent: EventOf<"call.intended"> = {
    type: "call.intended",
    runId,
    callId,
    seq: 0,
    attempt: 1,
    kind: "model",
    name: "local-llm",
    args: { prompt: "hello" },
    fingerprint: digest,
    disposition,
    pin: null,
    reconciler: null,
    idempotencyKey: `${callId}#1`,
  };
  const fold = foldRun([
    {
      type: "run.admitted",
      runId,
      chatId: "c",
      inputId: "i",
      inputDigest: digest,
      agent: { name: "a", version: "1" },
      machine: CURRENT_RUN_MACHINE,
      input: null,
    },
    intent,
  ]);
  const call = contextOf(fold).calls.get(callId);
  if (!call) throw new Error("the fold lost the call");
  return { call, intent };
};

const deps = { tools: new Map(), allowlist: {}, masker: makeMasker(), fingerprintKey: new Uint8Array(32) };

describe("model calls in doubt", () => {
  it("a model call whose intent records the replay policy is authorized to run again, as the model's policy", async () => {
    const { call, intent } = inDoubtModelCall("replay");
    expect(await classifyInDoubt(call, intent, deps)).toEqual({
      kind: "record",
      note: "replayed",
      events: [{ type: "call.replay-authorized", runId, callId, attempt: 1, reason: "model-policy" }],
    });
  });

  it("a model call with the default disposition holds the run", async () => {
    const { call, intent } = inDoubtModelCall("hold");
    expect(await classifyInDoubt(call, intent, deps)).toMatchObject({
      kind: "hold",
      reason: { code: "in-doubt", callId },
    });
  });
});
