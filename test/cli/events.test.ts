import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { parseJsonLines, runCli, useSharedDemoJournal, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();
const journal = useSharedDemoJournal(2);

const ENVELOPE_FIELDS = [
  "eventId",
  "hash",
  "payload",
  "position",
  "prevHash",
  "recordedAt",
  "streamId",
  "type",
  "version",
];
const GENESIS = "0".repeat(64);

/** A journal with more events than one read batch (500), written through the library. */
const bigJournal = async (db: string, calls: number): Promise<void> => {
  const tick = defineTool({
    name: "tick",
    args: Schema.Struct({ i: Schema.Number }),
    run: async ({ i }) => i,
  });
  const agent = defineAgent({
    name: "ticker",
    version: "1",
    run: async (turn) => {
      for (let i = 0; i < calls; i++) await turn.tool(tick, { i });
      return calls;
    },
  });
  const runtime = await openRuntime({ store: db, agents: [agent], tools: [tick] });
  const run = await runtime.submit({ chatId: "c", inputId: "m", agent: "ticker", content: null });
  await run.result;
  await runtime.close();
};

describe("holdfast events", () => {
  it("--json prints one object per line with exactly the envelope fields and the stored payload", async () => {
    const { db } = journal();
    const result = await runCli(["events", "--db", db, "--json"]);
    expect(result.code).toBe(0);
    const lines = parseJsonLines(result.stdout);
    expect(lines.length).toBeGreaterThan(10);
    for (const line of lines) {
      expect(Object.keys(line).toSorted()).toEqual(ENVELOPE_FIELDS);
      expect((line.payload as { type: string }).type).toBe(line.type);
      expect(line.hash).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(result.stdout).toContain("«secret:DEMO_API_KEY»");
    expect(result.stdout).not.toContain("demo-secret-value-1234");
  });

  it("positions strictly increase and every event's prevHash is the hash before it in its stream", async () => {
    const { db } = journal();
    const lines = parseJsonLines((await runCli(["events", "--db", db, "--json"])).stdout) as Array<{
      streamId: string;
      version: number;
      position: number;
      hash: string;
      prevHash: string;
    }>;
    const lastHash = new Map<string, string>();
    const lastVersion = new Map<string, number>();
    let lastPosition = 0;
    for (const line of lines) {
      expect(line.position).toBeGreaterThan(lastPosition);
      lastPosition = line.position;
      expect(line.prevHash).toBe(lastHash.get(line.streamId) ?? GENESIS);
      expect(line.version).toBe((lastVersion.get(line.streamId) ?? 0) + 1);
      lastHash.set(line.streamId, line.hash);
      lastVersion.set(line.streamId, line.version);
    }
    expect(lastHash.size).toBeGreaterThanOrEqual(2);
  });

  it("lists every event of a journal longer than one read batch, once and in order", async () => {
    const db = join(tempDir(), "journal.db");
    await bigJournal(db, 300);
    const lines = parseJsonLines((await runCli(["events", "--db", db, "--json"])).stdout);
    const positions = lines.map((line) => line.position as number);
    expect(positions.length).toBeGreaterThan(600);
    expect(new Set(positions).size).toBe(positions.length);
    expect(positions).toEqual(positions.toSorted((a, b) => a - b));

    const page = parseJsonLines(
      (await runCli(["events", "--db", db, "--json", "--after", "495", "--limit", "10"])).stdout,
    );
    expect(page).toEqual(lines.filter((line) => (line.position as number) > 495).slice(0, 10));
  });

  it("--after and --limit select a window of the same listing", async () => {
    const { db } = journal();
    const all = parseJsonLines((await runCli(["events", "--db", db, "--json"])).stdout);
    const window = parseJsonLines(
      (await runCli(["events", "--db", db, "--json", "--after", "3", "--limit", "4"])).stdout,
    );
    expect(window).toEqual(all.filter((line) => (line.position as number) > 3).slice(0, 4));
    const human = await runCli(["events", "--db", db, "--limit", "2"]);
    expect(human.code).toBe(0);
    expect(human.stdout.trim().split("\n")).toHaveLength(3);
    expect(human.stdout).toMatch(/run-\S+@1\s+run\.admitted/);
  });

  it("a position that is not a whole number is a usage error", async () => {
    const db = join(tempDir(), "journal.db");
    const result = await runCli(["events", "--db", db, "--after", "-3"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^holdfast: .*--after.*\nhint: /);
  });
});
