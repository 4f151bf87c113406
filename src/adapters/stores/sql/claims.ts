import type { Claim, ClaimOptions } from "../../../runtime/Journal.js";
import { all, get, now, type Program, run } from "./program.js";
import { type ClaimRow, toClaim } from "./rows.js";
import type { Statements } from "./statements.js";

export type ClaimResult = (Claim & { readonly previous: Claim | null }) | null;

/**
 * Whose live lease may be taken over: a worker id (`takeOverFrom`, known dead), or a test run on
 * the owner found in the claim row (`takeOverIf`), asked inside the claim's transaction — claim,
 * liveness check and take-over are one commit.
 */
export type TakeOver = string | ((ownerWorkerId: string) => boolean) | undefined;

/** The take-over a claim's options ask for (a test wins over a name). */
export const takeOverOf = (options: ClaimOptions): TakeOver => options.takeOverIf ?? options.takeOverFrom;

const mayTakeOver = (takeOver: TakeOver, owner: string): boolean =>
  typeof takeOver === "function" ? takeOver(owner) : takeOver === owner;

/**
 * Take or renew a run's claim, inside one write transaction. A live lease of another worker is
 * refused unless `takeOver` names that worker (or its test says yes); a take-over increments the epoch, which fences
 * every append the previous owner still has in flight. Epochs never go back for a run: a released
 * claim keeps its row and epoch, and claiming it again (by anyone) is the next epoch, so a fence
 * from an earlier execution never matches again (F24). A released row is no previous owner.
 */
export function* claimProgram(
  sql: Statements,
  runId: string,
  workerId: string,
  leaseMs: number,
  takeOver: TakeOver,
  trustExpiry = true,
): Program<ClaimResult> {
  const at = yield* now();
  return yield* claimAt(sql, runId, workerId, at, at + leaseMs, takeOver, trustExpiry);
}

/**
 * Claim several runs in one write transaction (a recovery pass): each run as {@link claimProgram}
 * would, in the order of their ids (PostgreSQL locks the rows in that order). The runs claimed;
 * a run missing from the map is held by another live worker.
 */
export function* claimManyProgram(
  sql: Statements,
  runIds: ReadonlyArray<string>,
  workerId: string,
  leaseMs: number,
  takeOver: TakeOver,
  trustExpiry = true,
): Program<Map<string, NonNullable<ClaimResult>>> {
  // One clock reading for the batch: every lease of it ends together.
  const at = yield* now();
  const claimed = new Map<string, NonNullable<ClaimResult>>();
  for (const runId of [...new Set(runIds)].sort()) {
    const claim = yield* claimAt(sql, runId, workerId, at, at + leaseMs, takeOver, trustExpiry);
    if (claim) claimed.set(runId, claim);
  }
  return claimed;
}

function* claimAt(
  sql: Statements,
  runId: string,
  workerId: string,
  at: number,
  leaseUntil: number,
  takeOver: TakeOver,
  trustExpiry: boolean,
): Program<ClaimResult> {
  // Two attempts: a first claim racing another first claim sees the winner's row on the second.
  for (let attempt = 0; attempt < 2; attempt++) {
    const row = yield* get<ClaimRow>(sql.claimForUpdate, [runId]);
    if (!row) {
      const inserted = yield* get<{ run_id: string }>(sql.insertClaim, [runId, workerId, 1, leaseUntil]);
      if (inserted) return { runId, workerId, epoch: 1, leaseUntil, previous: null };
      continue;
    }
    const previous = toClaim(row);
    if (!previous) {
      const epoch = Number(row.epoch) + 1;
      yield* run(sql.updateClaim, [workerId, epoch, leaseUntil, runId]);
      return { runId, workerId, epoch, leaseUntil, previous };
    }
    if (previous.workerId === workerId) {
      yield* run(sql.updateClaim, [workerId, previous.epoch, leaseUntil, runId]);
      return { runId, workerId, epoch: previous.epoch, leaseUntil, previous };
    }
    const live = previous.leaseUntil > at || !trustExpiry;
    if (live && !mayTakeOver(takeOver, previous.workerId)) return null;
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

/**
 * Give up the worker's claims (all, or those of `runIds`): each row stays, without an owner, with
 * its epoch, except the claims of runs that were never admitted, which go.
 */
export function* releaseProgram(
  sql: Statements,
  workerId: string,
  runIds: ReadonlyArray<string> | undefined,
): Program<void> {
  if (!runIds) {
    yield* run(sql.dropUnadmitted, [workerId]);
    yield* run(sql.release, [workerId]);
    return;
  }
  for (const runId of runIds) {
    yield* run(sql.dropUnadmittedRun, [workerId, runId]);
    yield* run(sql.releaseRun, [workerId, runId]);
  }
}
