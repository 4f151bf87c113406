import fc from "fast-check";
import type { ScanHit } from "../torture/byteScan.js";

/** One thing the fuzzer drives, with what it needs opened for it and closed after. */
export interface FuzzTarget {
  readonly name: string;
  /** Inputs for the full run (`npm run fuzz` without `--runs`), sized for ~10 minutes on 2 cores in all. */
  readonly defaultRuns: number;
  /** Opens what the target needs (temp journals, a server). */
  readonly setup: () => Promise<FuzzSession>;
}

export interface FuzzSession {
  // biome-ignore lint/suspicious/noExplicitAny: each target has its own input type
  readonly arbitrary: fc.Arbitrary<any>;
  /** Throws when the input shows a bug; else may name the outcome (`accepted`, a refusal's tag), for the counts. */
  // biome-ignore lint/suspicious/noExplicitAny: each target has its own input type
  readonly check: (input: any) => Promise<string | undefined> | string | undefined;
  readonly close: () => Promise<void>;
  /** Files the target wrote that hold a registered secret (a byte scan), checked before `close`. */
  readonly secretsLeft?: () => ReadonlyArray<ScanHit>;
}

export interface TargetReport {
  readonly runs: number;
  readonly failures: number;
  readonly partialWrites: number;
  readonly seed: number;
  readonly ms: number;
  /** How the inputs ended (`accepted`, a refusal's tag or status), when the target names it. */
  readonly outcomes?: Readonly<Record<string, number>>;
  /** The shrunk counterexample, when the property failed. */
  readonly counterexample?: string;
  readonly error?: string;
  /** Files holding a registered secret after the run (raw, JSON-escaped or URL-encoded), when scanned. */
  readonly secretsFound?: number;
  readonly secretFiles?: ReadonlyArray<string>;
}

/** A check that did not hold: what was expected, about the input fast-check shrinks. */
export class FuzzFailure extends Error {
  override readonly name = "FuzzFailure";
}

/** A refused input changed the journal. */
export class PartialWrite extends FuzzFailure {}

/** Run one target over `runs` inputs from `seed`; `progress` hears the count now and then. */
export const runTarget = async (
  target: FuzzTarget,
  options: { readonly seed: number; readonly runs: number; readonly progress?: (done: number) => void },
): Promise<TargetReport> => {
  const session = await target.setup();
  let report: TargetReport;
  try {
    report = await runProperty(session, options);
    const hits = session.secretsLeft?.();
    if (hits !== undefined) {
      report = {
        ...report,
        secretsFound: hits.length,
        ...(hits.length > 0 ? { secretFiles: [...new Set(hits.map((h) => `${h.file} (${h.label})`))] } : {}),
      };
    }
  } finally {
    await session.close();
  }
  return report;
};

const runProperty = async (
  session: FuzzSession,
  options: { readonly seed: number; readonly runs: number; readonly progress?: (done: number) => void },
): Promise<TargetReport> => {
  const started = performance.now();
  let tried = 0;
  let partialWrites = 0;
  let shrinking = false;
  const outcomes: Record<string, number> = {};
  const every = Math.max(1, Math.floor(options.runs / 10));
  const property = fc.asyncProperty(session.arbitrary, async (input) => {
    if (!shrinking && ++tried % every === 0) options.progress?.(tried);
    try {
      const outcome = await session.check(input);
      if (outcome !== undefined && !shrinking) outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    } catch (error) {
      // Shrinking runs the property again on smaller inputs; those are not counted as more writes.
      if (error instanceof PartialWrite && !shrinking) partialWrites++;
      shrinking = true;
      throw error;
    }
  });
  const details = await fc.check(property, { seed: options.seed, numRuns: options.runs, timeout: 60_000 });
  const report: TargetReport = {
    runs: details.numRuns,
    failures: details.failed ? 1 : 0,
    partialWrites,
    seed: options.seed,
    ms: Math.round(performance.now() - started),
    ...(Object.keys(outcomes).length > 0
      ? { outcomes: Object.fromEntries(Object.entries(outcomes).sort()) }
      : {}),
  };
  if (!details.failed) return report;
  const error = details.errorInstance;
  return {
    ...report,
    counterexample: fc.stringify(details.counterexample),
    error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
  };
};
