import { join } from "node:path";
import Database from "libsql";
import { figure, type Metric } from "../lib/metric.js";
import { microsSince, round, spreadOf } from "../lib/stats.js";
import { walPagesPerCommit } from "../lib/wal.js";

type Db = InstanceType<typeof Database>;

/** About the size of a stored journal event, so the floor writes comparable pages. */
const ROW = "x".repeat(400);

/** Rows per transaction in the batched floor. */
export const BATCH_ROWS = 100;

/**
 * The disk floor: plain inserts through the same driver, on the same file system, with the same
 * durability pragmas as the journal. The probe stays open for the whole bench, and sections sample
 * it between their own rounds, so every ratio compares figures taken side by side under the same
 * background load.
 */
export class FloorProbe {
  private readonly db: Db;
  private readonly insert;
  readonly singleMicros: number[] = [];
  readonly batchedMicros: number[] = [];

  private readonly path: string;

  constructor(folder: string) {
    this.path = join(folder, "floor.db");
    this.db = new Database(this.path);
    this.db.pragma("journal_mode = WAL");
    this.db.pragma("synchronous = FULL");
    this.db.exec("CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, data TEXT NOT NULL)");
    this.insert = this.db.prepare("INSERT INTO floor (data) VALUES (?)");
    // Warm-up: the first commits pay for creating the WAL and growing the file.
    this.commit(20, 1);
    this.commit(5, BATCH_ROWS);
  }

  /** `commits` transactions of one row each; returns µs per commit. */
  single(commits: number): number[] {
    const samples = this.commit(commits, 1);
    this.singleMicros.push(...samples);
    return samples;
  }

  /** `commits` transactions of BATCH_ROWS rows each; returns µs per commit. */
  batched(commits: number): number[] {
    const samples = this.commit(commits, BATCH_ROWS);
    this.batchedMicros.push(...samples);
    return samples;
  }

  /** WAL pages one single-row commit writes (measured once, outside the timed samples). */
  walPagesPerCommit(): Promise<number> {
    return walPagesPerCommit(this.db, `${this.path}-wal`, 50, () => {
      this.commit(50, 1);
    });
  }

  private commit(commits: number, rows: number): number[] {
    const samples: number[] = [];
    for (let c = 0; c < commits; c++) {
      const started = process.hrtime.bigint();
      this.db.exec("BEGIN IMMEDIATE");
      for (let r = 0; r < rows; r++) this.insert.run(ROW);
      this.db.exec("COMMIT");
      samples.push(microsSince(started));
    }
    return samples;
  }

  /** The floor's own figures, from every sample taken during the bench. */
  metrics(): Metric[] {
    const out: Metric[] = [];
    const add = (label: string, samples: number[], rows: number) => {
      if (samples.length === 0) return;
      const s = spreadOf(samples);
      out.push(
        figure({
          name: `floor.${label}.commit`,
          value: round(s.median),
          unit: "µs/commit",
          spread: { n: s.n, p95: round(s.p95), min: round(s.min), max: round(s.max) },
          note: `${rows} row(s) per BEGIN IMMEDIATE/COMMIT, WAL, synchronous=FULL`,
        }),
        figure({ name: `floor.${label}.rows_per_s`, value: round((rows * 1e6) / s.median), unit: "rows/s" }),
      );
    };
    add("single", this.singleMicros, 1);
    add(`batched${BATCH_ROWS}`, this.batchedMicros, BATCH_ROWS);
    return out;
  }

  close(): void {
    this.db.close();
  }
}
