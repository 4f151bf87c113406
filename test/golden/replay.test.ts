import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { decodeRow, EVENT_TYPES, type StoredRow } from "../../src/events/index.js";
import { contextOf, foldRun, runMachines, statusOf } from "../../src/machines/index.js";
import { callsOfRun, inlineProjections } from "../../src/projections/index.js";
import { LogAuditor } from "../../src/runtime/audit.js";

/** Recorded by `npx tsx test/golden/record.ts`; never re-recorded to make this test pass. */
const LOGS = join(import.meta.dirname, "..", "fixtures", "logs");

interface Expected {
  readonly events: number;
  readonly headDigest: string;
  readonly runs: Record<string, { readonly status: string; readonly context: unknown }>;
  readonly projections: Record<
    string,
    Record<string, { readonly value: unknown; readonly position: number }>
  >;
}

const names = readdirSync(LOGS)
  .filter((f) => f.endsWith(".jsonl"))
  .map((f) => f.slice(0, -".jsonl".length))
  .sort();

/** A golden line is a stored envelope with its payload as JSON; as a stored row it rehashes the same. */
const rowsOf = (name: string): StoredRow[] =>
  readFileSync(join(LOGS, `${name}.jsonl`), "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const { event, ...envelope } = JSON.parse(line) as Omit<StoredRow, "data"> & { event: unknown };
      return { ...envelope, data: JSON.stringify(event) };
    });

const expectedOf = (name: string): Expected =>
  JSON.parse(readFileSync(join(LOGS, `${name}.expected.json`), "utf8")) as Expected;

const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

/** Each run's events, decoded, in stream order, by stream id. */
const runStreamsOf = (name: string): Map<string, ReturnType<typeof decodeRow>[]> => {
  const byStream = new Map<string, ReturnType<typeof decodeRow>[]>();
  for (const row of rowsOf(name)) {
    if (!row.streamId.startsWith("run-")) continue;
    const list = byStream.get(row.streamId) ?? [];
    list.push(decodeRow(row));
    byStream.set(row.streamId, list);
  }
  for (const events of byStream.values()) events.sort((a, b) => a.version - b.version);
  return byStream;
};

describe("golden logs", () => {
  it("there are golden logs, and every run-machine version in the registry has at least one", () => {
    expect(names.length).toBeGreaterThanOrEqual(8);
    const machines = new Set(
      names.flatMap((name) =>
        rowsOf(name)
          .map((row) => decodeRow(row))
          .flatMap((r) => (r.event.type === "run.admitted" ? [r.event.machine] : [])),
      ),
    );
    expect([...machines].sort()).toEqual(Object.keys(runMachines).sort());
  });

  it("together the golden logs hold every event type holdfast writes", () => {
    const seen = new Set(names.flatMap((name) => rowsOf(name).map((r) => decodeRow(r).event.type)));
    // In the catalogue, but nothing writes it yet.
    expect(EVENT_TYPES.filter((type) => !seen.has(type))).toEqual(["journal.opened"]);
  });

  it.each(names)(
    "%s: every run folds through its recorded machine version to the recorded status and context",
    (name) => {
      const expected = expectedOf(name);
      const byStream = runStreamsOf(name);
      expect([...byStream.keys()].sort()).toEqual(Object.keys(expected.runs).sort());
      for (const [streamId, events] of byStream) {
        const fold = foldRun(events.map((e) => e.event));
        expect({ status: statusOf(fold), context: asJson(contextOf(fold)) }, streamId).toEqual(
          expected.runs[streamId],
        );
      }
    },
  );

  it.each(names)(
    "%s: each run's calls, folded from its stream, equal the calls rows recorded with the log",
    (name) => {
      // Logs recorded before decision 0031 hold the rows the runtime stored inline; later ones the fold.
      const recorded = expectedOf(name).projections.calls;
      expect(recorded, "the log records its calls").toBeDefined();
      const folded: Record<string, { value: unknown; position: number }> = {};
      for (const events of runStreamsOf(name).values())
        for (const call of callsOfRun(events))
          folded[call.callId] = { value: asJson(call), position: call.position };
      expect(folded).toEqual(recorded);
    },
  );

  it.each(names)(
    "%s: audits clean, and the projections rebuilt from it equal the rows the runtime stored",
    (name) => {
      const expected = expectedOf(name);
      const auditor = new LogAuditor();
      const rows = rowsOf(name);
      for (const row of rows) auditor.feed(row);
      // A log file carries no admissions table; the journal's own audit checks those.
      auditor.takeAdmissionChecks();
      for (const projection of inlineProjections) {
        const stored = Object.entries(expected.projections[projection.name] ?? {})
          .map(([key, row]) => ({ key, value: JSON.stringify(row.value), position: row.position }))
          .sort((a, b) => (a.key < b.key ? -1 : 1));
        auditor.compareStored(projection.name, stored);
        auditor.endProjection(projection.name);
      }
      const active = Object.entries(expected.runs)
        .filter(([, run]) => !["completed", "failed", "stopped", "cancelled"].includes(run.status))
        .map(([streamId]) => streamId.slice("run-".length));
      auditor.confirm(auditor.guardMismatches(new Set(active)));
      const report = auditor.finish(false);
      expect(report.findings).toEqual([]);
      expect(report).toMatchObject({ events: expected.events, headDigest: expected.headDigest });
    },
  );
});
