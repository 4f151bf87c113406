import type { Claim } from "../../runtime/Journal.js";
import { all, get, now, type Program, run } from "./program.js";
import { type ClaimRow, toClaim } from "./rows.js";
import type { Statements } from "./statements.js";

export type ClaimResult = (Claim & { readonly previous: Claim | null }) | null;

/**
 * Take or renew a run's claim, inside one write transaction. A live lease of another worker is
 * refused unless that worker is `takeOverFrom`; a take-over increments the epoch, which fences
 * every append the previous owner still has in flight.
 */
export function* claimProgram(
  sql: Statements,
  runId: string,
  workerId: string,
  leaseMs: number,
  takeOverFrom: string | undefined,
): Program<ClaimResult> {
  const at = yield* now();
  const leaseUntil = at + leaseMs;
  // Two attempts: a first claim racing another first claim sees the winner's row on the second.
  for (let attempt = 0; attempt < 2; attempt++) {
    const row = yield* get<ClaimRow>(sql.claimForUpdate, [runId]);
    const previous = row ? toClaim(row) : null;
    if (!previous) {
      const inserted = yield* get<{ run_id: string }>(sql.insertClaim, [runId, workerId, 1, leaseUntil]);
      if (inserted) return { runId, workerId, epoch: 1, leaseUntil, previous };
      continue;
    }
    if (previous.workerId === workerId) {
      yield* run(sql.updateClaim, [workerId, previous.epoch, leaseUntil, runId]);
      return { runId, workerId, epoch: previous.epoch, leaseUntil, previous };
    }
    if (previous.leaseUntil > at && previous.workerId !== takeOverFrom) return null;
    yield* run(sql.updateClaim, [workerId, previous.epoch + 1, leaseUntil, runId]);
    return { runId, workerId, epoch: previous.epoch + 1, leaseUntil, previous };
  }
  return null;
}

/** Extend every lease the worker still holds; the runs renewed (a run taken over is not among them). */
export function* renewProgram(sql: Statements, workerId: string, leaseMs: number): Program<string[]> {
  const at = yield* now();
  const rows = yield* all<{ run_id: string }>(sql.renew, [at + leaseMs, workerId]);
  return rows.map((r) => r.run_id);
}

export function* releaseProgram(
  sql: Statements,
  workerId: string,
  runIds: ReadonlyArray<string> | undefined,
): Program<void> {
  if (!runIds) {
    yield* run(sql.release, [workerId]);
    return;
  }
  for (const runId of runIds) yield* run(sql.releaseRun, [workerId, runId]);
}
