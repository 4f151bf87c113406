import type { RunRow } from "../../../projections/index.js";
import type { JournalReader } from "../../../runtime/Journal.js";
import { readLiveness } from "../../liveness.js";

/*
 * `GET /metrics` (decision 0065): a few gauges in the Prometheus text exposition format 0.0.4,
 * written by hand — each metric a `# HELP` and a `# TYPE` line, then `name{label="value"} number`.
 * Read from the journal at each scrape: the runs projection, one liveness read and the alert counts.
 */

/** Every status a run row may have, reported even at 0 so a series does not vanish. */
const STATUSES = [
  "running",
  "interrupted",
  "waiting",
  "held",
  "paused",
  "completed",
  "failed",
  "stopped",
  "cancelled",
] as const;

/** The content type of the text format. */
export const METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** A label value escaped as the format asks: backslash, double quote and newline. */
export const escapeLabel = (value: string): string =>
  value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

interface Gauge {
  readonly name: string;
  readonly help: string;
  readonly samples: ReadonlyArray<{
    readonly labels?: Readonly<Record<string, string>>;
    readonly value: number;
  }>;
}

/** One metric family in the text format. */
const family = (gauge: Gauge): string =>
  [
    `# HELP ${gauge.name} ${gauge.help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")}`,
    `# TYPE ${gauge.name} gauge`,
    ...gauge.samples.map((s) => {
      const labels = Object.entries(s.labels ?? {});
      const text = labels.length ? `{${labels.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}` : "";
      return `${gauge.name}${text} ${Number.isFinite(s.value) ? String(s.value) : "NaN"}`;
    }),
  ].join("\n");

/** The gauges now, as the text a Prometheus scrape reads. */
export const metricsText = async (reader: JournalReader): Promise<string> => {
  const rows = await reader.projectionRows<RunRow>("runs");
  const liveness = await readLiveness(reader);
  const counts = await reader.alertCounts();
  const byStatus = new Map<string, number>(STATUSES.map((s) => [s, 0]));
  let stalled = 0;
  let oldestHeld: number | null = null;
  for (const row of rows) {
    byStatus.set(row.status, (byStatus.get(row.status) ?? 0) + 1);
    if (row.status === "held") {
      const at = Date.parse(row.updatedAt);
      if (oldestHeld === null || at < oldestHeld) oldestHeld = at;
    }
    if ((row.status === "running" || row.status === "interrupted") && liveness.of(row).stalled) stalled += 1;
  }
  const gauges: Gauge[] = [
    {
      name: "holdfast_runs",
      help: "Runs in the journal by status (the runs projection).",
      samples: [...byStatus].map(([status, value]) => ({ labels: { status }, value })),
    },
    {
      name: "holdfast_runs_stalled",
      help: "Running or interrupted runs whose owner is provably gone or that nobody owns.",
      samples: [{ value: stalled }],
    },
    {
      name: "holdfast_runs_waiting",
      help: "Runs waiting durably (sleep, signal) for their time or their signal.",
      samples: [{ value: byStatus.get("waiting") ?? 0 }],
    },
    {
      name: "holdfast_held_oldest_age_seconds",
      help: "How long the oldest held run has waited for a decision, in seconds (0 when none is held).",
      samples: [{ value: oldestHeld === null ? 0 : Math.max(0, (liveness.now - oldestHeld) / 1000) }],
    },
    {
      name: "holdfast_alerts",
      help: "Alerts by delivery state: delivered, pending (being retried) and failed (attempts ran out).",
      samples: [
        { labels: { state: "delivered" }, value: counts.delivered },
        { labels: { state: "pending" }, value: counts.pending },
        { labels: { state: "failed" }, value: counts.failed },
      ],
    },
    {
      name: "holdfast_alerts_undelivered",
      help: "Alerts not delivered: pending plus failed.",
      samples: [{ value: counts.pending + counts.failed }],
    },
  ];
  return `${gauges.map(family).join("\n")}\n`;
};
