import type {
  Claim,
  LivenessSnapshot,
  RuntimeAnnouncement,
  RuntimePresence,
} from "../../../runtime/Journal.js";
import { all, now, type Program, run } from "./program.js";
import { type ClaimRow, toClaim } from "./rows.js";

/** How long a presence row that ran out stays, to say when its runtime was last seen: a week. */
export const PRESENCE_KEPT_MS = 7 * 24 * 60 * 60 * 1000;

/** The runtime registry's SQL (decision 0053): the same text on both engines. */
export const RUNTIME_SQL = {
  upsert:
    "INSERT INTO runtimes (worker_id, host, pid, agents, started_at, seen_at, expires_at, recovers_every_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) " +
    "ON CONFLICT (worker_id) DO UPDATE SET host = excluded.host, pid = excluded.pid, agents = excluded.agents, " +
    "seen_at = excluded.seen_at, expires_at = excluded.expires_at, recovers_every_ms = excluded.recovers_every_ms",
  forget: "DELETE FROM runtimes WHERE expires_at < ?",
  withdraw: "DELETE FROM runtimes WHERE worker_id = ?",
  all: "SELECT worker_id, host, pid, agents, started_at, seen_at, expires_at, recovers_every_ms FROM runtimes ORDER BY worker_id",
  ownedClaims:
    "SELECT run_id, worker_id, epoch, lease_until FROM claims WHERE worker_id IS NOT NULL ORDER BY run_id",
} as const;

interface RuntimeRow {
  readonly worker_id: string;
  readonly host: string;
  readonly pid: number | string;
  readonly agents: string;
  readonly started_at: number | string;
  readonly seen_at: number | string;
  readonly expires_at: number | string;
  readonly recovers_every_ms: number | string | null;
}

const toPresence = (row: RuntimeRow): RuntimePresence => {
  let agents: string[] = [];
  try {
    const parsed: unknown = JSON.parse(row.agents);
    if (Array.isArray(parsed)) agents = parsed.filter((a): a is string => typeof a === "string");
  } catch {
    // A row written by hand: no agents are claimed for it.
  }
  return {
    workerId: row.worker_id,
    host: row.host,
    pid: Number(row.pid),
    agents,
    startedAt: Number(row.started_at),
    seenAt: Number(row.seen_at),
    expiresAt: Number(row.expires_at),
    recoversEveryMs: row.recovers_every_ms === null ? null : Number(row.recovers_every_ms),
  };
};

/** Insert or renew a runtime's presence row, and drop rows that ran out long ago. */
export function* announceProgram(runtime: RuntimeAnnouncement, ttlMs: number): Program<void> {
  const at = yield* now();
  yield* run(RUNTIME_SQL.upsert, [
    runtime.workerId,
    runtime.host,
    runtime.pid,
    JSON.stringify(runtime.agents),
    at,
    at,
    at + ttlMs,
    runtime.recoversEveryMs,
  ]);
  yield* run(RUNTIME_SQL.forget, [at - PRESENCE_KEPT_MS]);
}

/** Remove a runtime's presence row. */
export function* withdrawProgram(workerId: string): Program<void> {
  yield* run(RUNTIME_SQL.withdraw, [workerId]);
}

/** Every owned claim and every presence row, with the clock the leases are measured by. */
export function* livenessProgram(): Program<LivenessSnapshot> {
  const at = yield* now();
  const claims = (yield* all<ClaimRow>(RUNTIME_SQL.ownedClaims, [])).flatMap((row): Claim[] => {
    const claim = toClaim(row);
    return claim ? [claim] : [];
  });
  const runtimes = (yield* all<RuntimeRow>(RUNTIME_SQL.all, [])).map(toPresence);
  return { now: at, claims, runtimes };
}
