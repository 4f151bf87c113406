import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { chatStreamId } from "../../src/events/index.js";
import { readDocument } from "../../src/runtime/documents.js";
import { expectTwoLineError, runCli } from "./cliProcess.js";

let dir = "";
let db = "";

const PLAN = {
  title: "Ship the release",
  items: [
    { id: "tests", text: "Run the tests", done: true },
    { id: "notes", text: "Write release notes", done: false },
  ],
};

const planFile = (name: string, value: unknown): string => {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(value));
  return path;
};

/** What the journal holds, read directly after the CLI process ended. */
const stored = async () => {
  const journal = await openStore(db);
  try {
    const document = await readDocument(journal, "c1", "plan");
    const events = await journal.readStream(chatStreamId("c1"));
    return { ...document, types: events.map((e) => e.event.type) };
  } finally {
    await journal.close();
  }
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "holdfast-cli-plan-"));
  db = join(dir, "journal.db");
  await (await openStore(db)).close();
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("holdfast plan (in order, one chat)", () => {
  it("a chat with no plan is at revision 0, with no value", async () => {
    const result = await runCli(["plan", "c1", "--db", db, "--json"]);
    expect(result.code).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual({ chatId: "c1", revision: 0, value: null, conflicts: 0 });
  });

  it("replace on the expected revision writes revision 1, by the person named", async () => {
    const file = planFile("plan.json", PLAN);
    const result = await runCli([
      "plan",
      "c1",
      "replace",
      "--expected-revision",
      "0",
      "--file",
      file,
      "--by",
      "ada",
      "--db",
      db,
    ]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("replaced the plan of chat c1: revision 0 → 1, by ada");
    expect(await stored()).toMatchObject({ revision: 1, value: PLAN, types: ["document.replaced"] });
  });

  it("shows the title, each item with [x] or [ ] and its id, and the revision", async () => {
    const result = await runCli(["plan", "c1", "--db", db]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("plan of chat c1, revision 1");
    expect(result.stdout).toContain("Ship the release");
    expect(result.stdout).toMatch(/\[x\] tests\s+Run the tests/);
    expect(result.stdout).toMatch(/\[ \] notes\s+Write release notes/);
  });

  it("a replace on a stale revision exits 1 naming expected and actual; the plan is unchanged, the refusal recorded", async () => {
    const file = planFile("stale.json", { ...PLAN, title: "Someone else's edit" });
    const result = await runCli([
      "plan",
      "c1",
      "replace",
      "--expected-revision",
      "0",
      "--file",
      file,
      "--db",
      db,
    ]);
    expect(result.code).toBe(1);
    const { reason, hint } = expectTwoLineError(result.stderr);
    expect(reason).toContain("the plan of chat c1 is at revision 1, not the expected 0");
    expect(hint).toContain("--expected-revision 1");
    expect(await stored()).toMatchObject({
      revision: 1,
      value: PLAN,
      types: ["document.replaced", "document.conflicted"],
    });
  });

  it("a plan of 101 items exits 1 with the reason; nothing is written", async () => {
    const items = Array.from({ length: 101 }, (_, i) => ({ id: `s${i}`, text: "step", done: false }));
    const file = planFile("long.json", { title: "too long", items });
    const result = await runCli([
      "plan",
      "c1",
      "replace",
      "--expected-revision",
      "1",
      "--file",
      file,
      "--db",
      db,
    ]);
    expect(result.code).toBe(1);
    expect(expectTwoLineError(result.stderr).reason).toBe(
      "plan is invalid: it has 101 items; a plan holds at most 100; nothing was written",
    );
  });

  it("a plan over 64 KiB exits 1 with the reason; nothing is written", async () => {
    const items = Array.from({ length: 70 }, (_, i) => ({
      id: `s${i}`,
      text: "x".repeat(1000),
      done: false,
    }));
    const file = planFile("big.json", { title: "too big", items });
    const result = await runCli([
      "plan",
      "c1",
      "replace",
      "--expected-revision",
      "1",
      "--file",
      file,
      "--db",
      db,
    ]);
    expect(result.code).toBe(1);
    expect(expectTwoLineError(result.stderr).reason).toMatch(
      /^plan is invalid: it is \d+ bytes encoded; a plan holds at most 65536; nothing was written$/,
    );
    expect(await stored()).toMatchObject({
      revision: 1,
      value: PLAN,
      types: ["document.replaced", "document.conflicted"],
    });
  });
});
