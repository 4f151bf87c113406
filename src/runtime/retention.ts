import {
  decodeRow,
  type Keyring,
  type RecordedEvent,
  type StoredRow,
  verifyStreamChain,
} from "../events/index.js";
import { foldRun, statusOf } from "../machines/index.js";
import type { Journal, PruneReport, RetentionPolicy } from "./Journal.js";

import { DEFAULT_RETENTION } from "./retentionDefaults.js";

/**
 * A whole policy from a partial one (defaults for what it leaves out), checked: `keepRuns` a whole
 * number ≥ 0, `keepDays` a number ≥ 0. Throws a `RangeError` naming the bad value.
 *
 * @example
 * resolveRetention({ keepDays: 7 }) // { keepRuns: 100, keepDays: 7 }
 */
export const resolveRetention = (policy: Partial<RetentionPolicy>): RetentionPolicy => {
  const resolved = { ...DEFAULT_RETENTION, ...policy };
  if (!Number.isInteger(resolved.keepRuns) || resolved.keepRuns < 0)
    throw new RangeError(`retention keepRuns must be a whole number ≥ 0, got ${resolved.keepRuns}`);
  if (!Number.isFinite(resolved.keepDays) || resolved.keepDays < 0)
    throw new RangeError(`retention keepDays must be a number ≥ 0, got ${resolved.keepDays}`);
  return resolved;
};

/** Chats of child runs are `child:<parent callId>`, and a call id is `<runId>/<seq>`. */
const CHILD_CHAT_PREFIX = "child:";

/** A run as retention sees it: its guard row and its stream's head. */
export interface RetentionCandidate {
  readonly runId: string;
  readonly chatId: string;
  /** The active-run guard says the run is not finished. Active runs are never candidates. */
  readonly active: boolean;
  readonly version: number;
  readonly hash: string;
  /** Position of the stream's last event: newer runs have larger positions. */
  readonly position: number;
  /** When the stream's last event was recorded (ISO 8601). */
  readonly recordedAt: string;
}

export interface RetentionSelection {
  readonly prune: ReadonlyArray<RetentionCandidate>;
  /** Finished runs the policy keeps. */
  readonly kept: number;
}

/** The parent run of a child run, from its chat id; null for a run that is not a child. */
export const parentRunOf = (chatId: string): string | null => {
  if (!chatId.startsWith(CHILD_CHAT_PREFIX)) return null;
  const callId = chatId.slice(CHILD_CHAT_PREFIX.length);
  const slash = callId.lastIndexOf("/");
  return slash > 0 ? callId.slice(0, slash) : null;
};

/**
 * Which finished runs a policy removes: everything finished except the newest `keepRuns` and
 * those finished within `keepDays` of `now`. A child run goes only with its parent (or after it),
 * so a kept parent never loses the child whose result it recorded. Pure: the caller checks each
 * selected run against its events before deleting anything.
 *
 * @example
 * selectForPruning(candidates, { keepRuns: 100, keepDays: 30 }, Date.now()).prune
 */
export const selectForPruning = (
  candidates: ReadonlyArray<RetentionCandidate>,
  policy: RetentionPolicy,
  now: number,
): RetentionSelection => {
  if (!Number.isInteger(policy.keepRuns) || policy.keepRuns < 0)
    throw new RangeError(`keepRuns must be a whole number ≥ 0, got ${policy.keepRuns}`);
  if (!Number.isFinite(policy.keepDays) || policy.keepDays < 0)
    throw new RangeError(`keepDays must be a number ≥ 0, got ${policy.keepDays}`);
  const present = new Set(candidates.map((c) => c.runId));
  const finished = candidates.filter((c) => !c.active).sort((a, b) => b.position - a.position);
  const cutoff = now - policy.keepDays * 86_400_000;
  const prune = new Map<string, RetentionCandidate>();
  finished.forEach((candidate, index) => {
    const recent = Date.parse(candidate.recordedAt) >= cutoff;
    if (index >= policy.keepRuns && !recent) prune.set(candidate.runId, candidate);
  });
  // A child stays while its parent stays; repeat for grandchildren until nothing changes.
  for (let changed = true; changed; ) {
    changed = false;
    for (const [runId, candidate] of prune) {
      const parent = parentRunOf(candidate.chatId);
      if (parent !== null && present.has(parent) && !prune.has(parent)) {
        prune.delete(runId);
        changed = true;
      }
    }
  }
  const selected = finished.filter((c) => prune.has(c.runId));
  return { prune: selected, kept: finished.length - selected.length };
};

/**
 * The order a prune removes the selected runs in, batch by batch. A parent comes before its
 * children: a child goes with its parent or after it, so a child whose parent was left alone can be
 * left alone too. Otherwise oldest first: a chat's row shows the chat's latest run, so removing a
 * chat's runs oldest first folds that row again once, when its latest run goes, instead of once per
 * batch.
 *
 * @example
 * pruneOrder(selectForPruning(candidates, policy, Date.now()).prune)
 */
export const pruneOrder = (selected: ReadonlyArray<RetentionCandidate>): RetentionCandidate[] => {
  const byId = new Map(selected.map((c) => [c.runId, c]));
  const family = new Map<string, { root: number; depth: number }>();
  const placeOf = (candidate: RetentionCandidate): { root: number; depth: number } => {
    const known = family.get(candidate.runId);
    if (known) return known;
    const parentId = parentRunOf(candidate.chatId);
    const parent = parentId === null ? undefined : byId.get(parentId);
    const place = parent
      ? { root: placeOf(parent).root, depth: placeOf(parent).depth + 1 }
      : { root: candidate.position, depth: 0 };
    family.set(candidate.runId, place);
    return place;
  };
  return [...selected].sort((a, b) => {
    const pa = placeOf(a);
    const pb = placeOf(b);
    return pa.root - pb.root || pa.depth - pb.depth || a.position - b.position;
  });
};

const FINISHED = new Set(["completed", "failed", "stopped", "cancelled"]);

/**
 * Check a selected run against its own events before anything is deleted: every row decodes, the
 * chain verifies, the stream ends where the candidate says, and the run machine folds it to a
 * finished status. Returns the status and the decoded events, or why the run must stay (retention never removes
 * evidence of a problem, nor a run the caches wrongly call finished).
 */
export const checkPrunable = (
  rows: ReadonlyArray<StoredRow>,
  candidate: Pick<RetentionCandidate, "version" | "hash">,
  ring: Keyring | null = null,
):
  | { readonly status: string; readonly events: ReadonlyArray<RecordedEvent> }
  | { readonly problem: string } => {
  let events: ReturnType<typeof decodeRow>[];
  try {
    events = rows.map((row) => decodeRow(row, ring));
  } catch (error) {
    return { problem: `an event does not decode (${errorText(error)}); run \`holdfast audit\`` };
  }
  const broken = verifyStreamChain(rows);
  if (broken)
    return { problem: `its hash chain breaks at version ${broken.version}; run \`holdfast audit\`` };
  const head = events.at(-1);
  if (!head || head.version !== candidate.version || head.hash !== candidate.hash)
    return { problem: "its stream moved while retention ran; it is left for the next prune" };
  let status: string;
  try {
    status = statusOf(foldRun(events.map((e) => e.event)));
  } catch (error) {
    return { problem: `its events do not fold (${errorText(error)}); run \`holdfast audit\`` };
  }
  if (!FINISHED.has(status))
    return {
      problem: `its events say it is ${status}, not finished (the active-run guard disagrees); run \`holdfast audit\``,
    };
  return { status, events };
};

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Apply a retention policy to a journal: by `openRuntime` when `retention` is configured (after
 * recovery), and by `holdfast prune`. `false` does nothing.
 *
 * @example
 * const report = await applyRetention(journal, { keepRuns: 100, keepDays: 30 });
 * console.log(report.pruned.length, "runs removed");
 */
export const applyRetention = async (
  journal: Journal,
  policy: Partial<RetentionPolicy> | false = DEFAULT_RETENTION,
  options: { readonly dryRun?: boolean } = {},
): Promise<PruneReport | null> => {
  if (policy === false) return null;
  return journal.prune({ ...resolveRetention(policy), dryRun: options.dryRun ?? false });
};
