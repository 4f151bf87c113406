import { InvalidArgumentError } from "commander";
import { DECISION_KINDS } from "../../../events/decisionKinds.js";
import { type ExpectedHead, parseExpectedHead } from "../../../runtime/audit/expectedHead.js";
import { MIN_LEASE_MS } from "../../../runtime/leaseBounds.js";
import { MODEL_ANSWER_HINT } from "../../../runtime/modelAnswerHint.js";
import { DEFAULT_PRUNE_BATCH, DEFAULT_RETENTION } from "../../../runtime/retentionDefaults.js";

/**
 * What the CLI's option definitions need (choices, defaults, parsers), apart from the commands: the
 * commands are imported only when one runs, so `holdfast --help` and each command load no more than
 * they use. Everything here imports plain values only.
 */

/** `holdfast runs --status`. */
export const RUN_STATUSES = [
  "running",
  "interrupted",
  "held",
  "paused",
  "waiting",
  "completed",
  "failed",
  "stopped",
  "cancelled",
  "stalled",
] as const;
/** A run status, or `stalled`: a running run whose owner is provably gone, or that nobody owns. */
export type RunStatusFilter = (typeof RUN_STATUSES)[number];

/** The decisions `holdfast decide` records. */
export const DECISIONS: ReadonlyArray<(typeof DECISION_KINDS)[number]> = DECISION_KINDS;

/** What `holdfast decide --help` says to enter for a model call. */
export { MODEL_ANSWER_HINT };

export const DEFAULT_KEEP_RUNS = DEFAULT_RETENTION.keepRuns;
export const DEFAULT_KEEP_DAYS = DEFAULT_RETENTION.keepDays;
export { DEFAULT_PRUNE_BATCH };

/** `--keep-days` takes a number of days ≥ 0 (fractions allowed: 0.5 is twelve hours). */
export const parseKeepDays = (value: string): number => {
  if (!/^\d+(\.\d+)?$/.test(value))
    throw new InvalidArgumentError(`--keep-days takes a number of days ≥ 0, got "${value}"`);
  return Number(value);
};

/** `--expect-head`: a head digest as an audit printed it, `DIGEST` or `DIGEST@POSITION`. */
export const parseExpectHead = (value: string): ExpectedHead => {
  const parsed = parseExpectedHead(value);
  if (!parsed)
    throw new InvalidArgumentError(
      `--expect-head takes the 64-hex-digit head digest an audit printed, or DIGEST@POSITION, got "${value}"`,
    );
  return parsed;
};

export const DEFAULT_LEASE_MS = 15_000;

/** `--lease-ms`: whole milliseconds, at least the shortest lease a runtime accepts. */
export const parseLeaseMs = (value: string): number => {
  if (!/^\d+$/.test(value) || Number(value) < MIN_LEASE_MS)
    throw new InvalidArgumentError(
      `--lease-ms takes a whole number of milliseconds ≥ ${MIN_LEASE_MS} (room for the safety margin of law 10), got "${value}"`,
    );
  return Number(value);
};

/** `--concurrency`: a whole number, at least 1. */
export const parseConcurrency = (value: string): number => {
  if (!/^\d+$/.test(value) || Number(value) < 1)
    throw new InvalidArgumentError(`--concurrency takes a whole number ≥ 1, got "${value}"`);
  return Number(value);
};
