/**
 * The browser agent's own check (`--agent browser`), beside the common one (check.ts, which counts
 * the site's POSTs per key as it counts every witness): the form's submits as the journal records
 * them against the submits the test site received.
 */
import type { RecordedEvent } from "../src/index.js";

/** What one trial's submits came to, and what broke a law. */
export interface BrowserCheck {
  /** Submit attempts the journal intended. */
  readonly submitsIntended: number;
  /** Submit attempts the site received (counted under their key). */
  readonly submitsReceived: number;
  /** Submit attempts the journal holds as done: completed, reconciled completed, or confirmed. */
  readonly submitsDone: number;
  /** The submit's probe's verdicts during recovery (`call.reconciled` of a submit). */
  readonly probe: { readonly done: number; readonly notDone: number; readonly unknown: number };
  /** Orders the site kept for the trial (one per received key). */
  readonly orders: number;
  /** A submit the site received that the journal says was not done, or a second order not decided by a person. */
  readonly duplicates: string[];
  /** A submit done in the journal the site never received, or one received the journal does not account for. */
  readonly lost: string[];
}

/**
 * Check the trial's submits: every submit attempt the journal holds as done was received by the
 * site; every one the site received was intended by the journal and is done there (or its run is
 * held on it); none the site received is recorded as not done (failed, reconciled not completed,
 * decided not completed or run again); and the site kept at most one order for the trial unless a
 * person's decision allowed another.
 */
export const checkBrowser = (
  events: ReadonlyArray<RecordedEvent>,
  received: ReadonlyMap<string, number>,
  orders: number,
  actingTool: string,
): BrowserCheck => {
  const submits = new Set<string>();
  const latest = new Map<string, number>();
  const done = new Set<string>();
  const notDone = new Map<string, string>();
  const heldOn = new Set<string>();
  const probe = { done: 0, notDone: 0, unknown: 0 };
  let repeatAllowed = false;
  for (const { event } of events) {
    if (event.type === "call.intended") {
      latest.set(event.callId, event.attempt);
      const args = event.args as { action?: unknown } | null;
      if (event.name === actingTool && args?.action === "submit")
        submits.add(`${event.callId}#${event.attempt}`);
    }
    const key = "callId" in event && "attempt" in event ? `${event.callId}#${event.attempt}` : "";
    if (event.type === "call.completed") done.add(key);
    if (event.type === "call.failed") notDone.set(key, "failed definitely");
    if (event.type === "call.reconciled") {
      if (event.outcome === "completed") done.add(key);
      if (event.outcome === "not-completed") notDone.set(key, "reconciled not completed");
      if (submits.has(key)) {
        if (event.outcome === "completed") probe.done++;
        else if (event.outcome === "not-completed") probe.notDone++;
        else probe.unknown++;
      }
    }
    if (event.type === "run.held")
      for (const reason of event.reasons)
        if (reason.callId) heldOn.add(`${reason.callId}#${latest.get(reason.callId) ?? 1}`);
    if (event.type === "decision.recorded")
      for (const d of event.calls) {
        const at = `${d.callId}#${latest.get(d.callId) ?? 1}`;
        heldOn.delete(at);
        if (d.decision === "confirmed-completed") done.add(at);
        else {
          notDone.set(at, `decided ${d.decision}`);
          if (submits.has(at)) repeatAllowed = true;
        }
      }
  }
  const duplicates: string[] = [];
  const lost: string[] = [];
  let submitsDone = 0;
  for (const key of submits) {
    if (!done.has(key)) continue;
    submitsDone++;
    if (!received.has(key))
      lost.push(`${key}: the submit is done in the journal, the site never received it`);
  }
  for (const key of received.keys()) {
    if (!submits.has(key)) lost.push(`${key}: the site received a submit the journal never intended`);
    else if (notDone.has(key))
      duplicates.push(`${key}: the site received it, the journal has it ${notDone.get(key)}`);
    else if (!done.has(key) && !heldOn.has(key))
      lost.push(`${key}: the site received it, the journal has no outcome for it and no run held on it`);
  }
  if (orders > 1 && !repeatAllowed)
    duplicates.push(
      `the site kept ${orders} orders for the trial, and no person's decision allowed a repeat`,
    );
  return {
    submitsIntended: submits.size,
    submitsReceived: received.size,
    submitsDone,
    probe,
    orders,
    duplicates,
    lost,
  };
};
