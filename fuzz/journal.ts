import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Schema } from "effect";
import Database from "libsql";
import { DefiniteFailure, defineAgent, defineTool, openRuntime, type Runtime } from "../src/index.js";
import { headDigest } from "../src/runtime/audit/heads.js";
import { byteScan } from "../torture/byteScan.js";

/** The registered secret every fuzzed journal masks. */
export const FUZZ_SECRET = "fuzz-secret-7Qm2v";

/**
 * A journal in a temp folder with a runtime on it and two held runs: `doubt` (a call in doubt: the
 * tool threw without proof) and `flaky` (a call failed definitely: a retry grant applies).
 */
export const givenJournal = async () => {
  const dir = mkdtempSync(join(tmpdir(), "holdfast-fuzz-"));
  const db = join(dir, "journal.db");
  const charge = defineTool({
    name: "charge",
    args: Schema.Struct({}),
    run: async () => {
      throw new Error("connection reset after send");
    },
  });
  const deploy = defineTool({
    name: "deploy",
    args: Schema.Struct({}),
    run: async () => {
      throw new DefiniteFailure("the registry refused the image (403)");
    },
  });
  const agents = [
    defineAgent({ name: "ok", version: "1", run: async () => "done" }),
    defineAgent({ name: "doubt", version: "1", run: async (turn) => turn.tool(charge, {}) }),
    defineAgent({ name: "flaky", version: "1", run: async (turn) => turn.tool(deploy, {}) }),
  ];
  const runtime: Runtime = await openRuntime({
    store: db,
    agents,
    tools: [charge, deploy],
    secrets: { FUZZ: FUZZ_SECRET },
    allowlist: {},
  });
  const held = async (agent: string) => {
    const run = await runtime.submit({ chatId: `chat-${agent}`, inputId: "input-1", agent, content: null });
    await run.result;
    const events = await runtime.events(run.runId);
    const call = events.find((e) => e.event.type === "call.intended")?.event as
      | { callId: string }
      | undefined;
    return { runId: run.runId, callId: call?.callId ?? "none" };
  };
  const doubt = await held("doubt");
  const flaky = await held("flaky");
  const head = journalHead(db);
  return {
    dir,
    db,
    runtime,
    doubt,
    flaky,
    head,
    /** Files in the fuzz folder (journal, WAL, SHM, other stores the target opened) holding the secret. */
    secretsLeft: () => byteScan([dir], { FUZZ: FUZZ_SECRET }),
    close: async () => {
      head.close();
      await runtime.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
};
export type GivenJournal = Awaited<ReturnType<typeof givenJournal>>;

/**
 * What a refused input must leave as it was: the head digest (as `holdfast audit` computes it, from
 * every stream's last event) and the admission rows, read on a separate connection. Cheaper than a
 * full audit per input, which grows with the journal.
 */
export const journalHead = (db: string) => {
  const connection = new Database(db, { timeout: 5_000 });
  const heads = connection.prepare(
    "SELECT stream_id AS streamId, version, hash FROM events e WHERE version = (SELECT MAX(version) FROM events WHERE stream_id = e.stream_id)",
  );
  const admissions = connection.prepare("SELECT COUNT(*) AS n FROM admissions");
  const read = async (): Promise<string> => {
    const rows = heads.all() as Array<{ streamId: string; version: number; hash: string }>;
    const { n } = admissions.get() as { n: number };
    return `${headDigest(rows)}+${n}`;
  };
  return Object.assign(read, { close: () => connection.close() });
};
