import type { FloorProbe } from "../sections/floor.js";
import type { Metric } from "./metric.js";
import type { TempRoot } from "./temp.js";

export interface BenchOptions {
  readonly quick: boolean;
}

/** A line of the chart: calls/s against concurrency, or recovery time against runs. */
export interface Series {
  readonly chart: "concurrency" | "recovery";
  readonly label: string;
  readonly points: ReadonlyArray<readonly [number, number]>;
  /** A reference line (a target), drawn dashed. */
  readonly reference?: boolean;
}

/** A journal one section wrote and another may reuse (writing a 1M-event log twice is minutes). */
export interface SharedLog {
  readonly path: string;
  readonly events: number;
}

export interface BenchContext {
  readonly options: BenchOptions;
  /** Logs kept for later sections, by name (the recovery section leaves its filler log here). */
  readonly logs: Map<string, SharedLog>;
  readonly temp: TempRoot;
  /** The disk floor, sampled between the measurements it is compared with. */
  readonly floor: FloorProbe;
}

export interface SectionResult {
  readonly metrics: ReadonlyArray<Metric>;
  readonly series?: ReadonlyArray<Series>;
}

/** One numbered part of the benchmark; adding a measurement is adding one of these. */
export interface Section {
  readonly name: string;
  run(context: BenchContext): Promise<SectionResult>;
}
