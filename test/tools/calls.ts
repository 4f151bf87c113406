import { keyedHash } from "../../src/events/index.js";
import type {
  CallContext,
  ReconcileContext,
  Reconciler,
  ReconcileVerdict,
} from "../../src/runtime/define.js";

/** The journal key the directly-run tools digest with (a runtime uses its journal's own). */
export const TEST_KEY = new Uint8Array(32).fill(7);

/** A call context for running a built-in tool directly, as the runtime would after its intent. */
export const callContext = (key: string, checkLease: () => void = () => {}): CallContext => {
  const [callId = key, attempt = "1"] = key.split("#");
  return {
    runId: callId.split("/")[0] ?? callId,
    chatId: "c",
    callId,
    attempt: Number(attempt),
    idempotencyKey: key,
    checkLease,
    signal: new AbortController().signal,
    keyedHash: () => keyedHash(TEST_KEY),
  };
};

export const reconcileContext = (key: string): ReconcileContext => {
  const context = callContext(key);
  return {
    runId: context.runId,
    callId: context.callId,
    attempt: context.attempt,
    idempotencyKey: key,
    args: {},
    keyedHash: context.keyedHash,
  };
};

interface Reconciled {
  // biome-ignore lint/suspicious/noExplicitAny: tools of any argument type
  readonly reconciler: Reconciler<any> | null;
}

/** What the tool's probe records for this call (stored in the intent, JSON as the runtime keeps it). */
export const probeOf = (tool: Reconciled, args: unknown, key: string): unknown => {
  const probe = tool.reconciler?.probe?.(args, callContext(key));
  return JSON.parse(JSON.stringify(probe ?? null));
};

/** The reconciler's verdict, as recovery would ask for it. */
export const checkOf = (tool: Reconciled, probe: unknown, key: string): Promise<ReconcileVerdict> => {
  if (!tool.reconciler) throw new Error("the tool has no reconciler");
  return tool.reconciler.check(probe, reconcileContext(key));
};
