import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { runWorker, startScript } from "../support/processes.js";
import { witnessLines } from "../support/witness.js";
import { expectTwoLineError, ROOT, runCli, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();
const MAIN = join(ROOT, "src", "adapters", "surfaces", "cli", "main.ts");
const MODULE = join(ROOT, "test", "support", "worker-module.ts");

/** `holdfast worker` as a long-running child process; its JSON lines as they come. */
const startWorkerCli = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", MAIN, "worker", ...args], {
    cwd: ROOT,
    env: { ...process.env, HOLDFAST_STORE: "", HOLDFAST_WORKER_ID: "", HOLDFAST_CRASH_AT: "", ...env },
    stdio: [args.includes("--stdin") ? "pipe" : "ignore", "pipe", "pipe"],
  });
  const lines: Array<Record<string, unknown>> = [];
  let stderr = "";
  let buffer = "";
  child.stdout?.on("data", (chunk) => {
    buffer += chunk;
    for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
      lines.push(JSON.parse(buffer.slice(0, nl)) as Record<string, unknown>);
      buffer = buffer.slice(nl + 1);
    }
  });
  child.stderr?.on("data", (chunk) => {
    stderr += chunk;
  });
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.on("close", (code, signal) => resolve({ code, signal })),
  );
  const waitFor = async (kind: string, count = 1) => {
    const deadline = Date.now() + 30_000;
    while (lines.filter((l) => l.kind === kind).length < count) {
      if (Date.now() > deadline) throw new Error(`no "${kind}" line: ${JSON.stringify(lines)} ${stderr}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    return lines.find((l) => l.kind === kind)!;
  };
  return { child, lines, exit, waitFor, stderr: () => stderr };
};

describe("holdfast worker", () => {
  it("without --module it is a usage error that names the flag", async () => {
    const result = await runCli(["worker", "--store", join(tempDir(), "journal.db")]);
    expect(result.code).toBe(2);
    expect(expectTwoLineError(result.stderr).reason).toContain("--module");
  });

  it("--store and --db naming two journals is a usage error that names both", async () => {
    const dir = tempDir();
    const result = await runCli(["worker", "--store", join(dir, "a.db"), "--db", join(dir, "b.db")]);
    expect(result.code).toBe(2);
    expect(expectTwoLineError(result.stderr).reason).toContain("name two journals");
  });

  it("takes over the run of a dead process at once, says so in one line per step, and on SIGTERM stops with its claims released", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    // A process dies right after the intent of its reconciled call: the effect never happened.
    const crashed = await runWorker({
      HF_DB: db,
      HF_WITNESS: witness,
      HF_ACTION: "submit",
      HF_AGENT: "table",
      HF_CHAT: "c",
      HF_INPUT: "i",
      HF_PREFIX: "p",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "reconciled",
    });
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL");

    const worker = startWorkerCli(
      // `--db`, as every other command names the journal (the same as `--store`).
      ["--db", db, "--module", MODULE, "--worker-id", "w-test", "--lease-ms", "3000", "--json"],
      { HF_WITNESS: witness },
    );
    try {
      expect(await worker.waitFor("started")).toMatchObject({
        workerId: "w-test",
        leaseMs: 3000,
        everyMs: 1500,
      });
      const tookOver = await worker.waitFor("took-over");
      expect(tookOver.from).toEqual(expect.stringMatching(/:\d+:/));
      expect(await worker.waitFor("resumed")).toMatchObject({ runId: tookOver.runId });
      // The reconciler proved the call never ran: it ran once, here.
      expect(await worker.waitFor("settled")).toMatchObject({ runId: tookOver.runId, status: "completed" });
      expect(witnessLines(witness).filter((l) => l.startsWith("sent p-sent"))).toHaveLength(1);
    } finally {
      worker.child.kill("SIGTERM");
    }
    expect(await worker.exit, worker.stderr()).toEqual({ code: 0, signal: null });
    expect(worker.lines.at(-1)).toMatchObject({ kind: "stopped", workerId: "w-test" });
    const journal = LibsqlJournal.open(db);
    try {
      const events = (
        await journal.readStream(`run-${String(worker.lines.find((l) => l.kind === "took-over")!.runId)}`)
      ).map((e) => e.event.type);
      expect(events).toContain("run.claimed");
      expect(events.at(-1)).toBe("run.completed");
      expect(
        await journal.currentClaim(String(worker.lines.find((l) => l.kind === "took-over")!.runId)),
      ).toBeNull();
    } finally {
      await journal.close();
    }
  }, 60_000);

  it("a worker whose module has only v2 reports a v1 run as version-missing and leaves it; a line may name agentVersion; a worker with v1 beside v2 then finishes the run", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const module = join(dir, "versions.mts");
    const support = join(ROOT, "test", "support", "versions-worker.ts");
    writeFileSync(
      module,
      `import { greeterVersion, step } from ${JSON.stringify(support)};\nexport const agents = process.env.HF_VERSIONS!.split(",").map(greeterVersion);\nexport const tools = [step];\n`,
    );
    const submitter = startScript(support, {
      HF_DB: db,
      HF_WITNESS: witness,
      HF_VERSIONS: "1",
      HF_MODE: "submit",
      HF_RUNS: "old:1:hang",
    });
    await submitter.waitFor("ready");
    const runId = String(
      (submitter.lines.find((l) => l.kind === "ready")!.runs as Record<string, string>).old,
    );
    await submitter.kill();

    const args = ["--db", db, "--module", module, "--lease-ms", "3000", "--json"];
    const onlyV2 = startWorkerCli([...args, "--stdin"], { HF_WITNESS: witness, HF_VERSIONS: "2" });
    try {
      expect(await onlyV2.waitFor("version-missing")).toMatchObject({
        runId,
        agent: "greeter@1",
        registered: ["2"],
      });
      onlyV2.child.stdin!.write(
        `${JSON.stringify({ chatId: "n", inputId: "i", agent: "greeter", content: { how: "plain" } })}\n`,
      );
      onlyV2.child.stdin!.write(
        `${JSON.stringify({ chatId: "m", inputId: "i", agent: "greeter", agentVersion: "1", content: { how: "plain" } })}\n`,
      );
      expect(await onlyV2.waitFor("admitted")).toMatchObject({ chatId: "n" });
      expect(String((await onlyV2.waitFor("refused")).reason)).toContain(
        'agent "greeter" has no version "1" in this runtime (registered versions: 2)',
      );
      // Passes go on every half lease: the run is reported once and never taken.
      await new Promise((r) => setTimeout(r, 2_000));
      expect(onlyV2.lines.filter((l) => l.kind === "version-missing")).toHaveLength(1);
      expect(onlyV2.lines.some((l) => l.runId === runId && l.kind !== "version-missing")).toBe(false);
    } finally {
      onlyV2.child.kill("SIGTERM");
    }
    expect(await onlyV2.exit, onlyV2.stderr()).toEqual({ code: 0, signal: null });

    const both = startWorkerCli(args, { HF_WITNESS: witness, HF_VERSIONS: "1,2" });
    try {
      expect(await both.waitFor("resumed")).toMatchObject({ runId });
      expect(await both.waitFor("settled")).toMatchObject({ runId, status: "completed" });
    } finally {
      both.child.kill("SIGTERM");
    }
    expect(await both.exit, both.stderr()).toEqual({ code: 0, signal: null });
    expect(witnessLines(witness)).toEqual(["v1:old:a", "v2:n:a", "v2:n:b", "v1:old:b"]);
  }, 90_000);

  /** A worker module: the recovery-table agent and tools, plus `extra` (its secrets). */
  const moduleWith = (dir: string, extra: string): string => {
    const path = join(dir, "agents.mts");
    writeFileSync(path, `export { agents, tools } from ${JSON.stringify(MODULE)};\n${extra}\n`);
    return path;
  };
  /** Every byte holdfast keeps for a journal: the file, its WAL, shared memory and anchor. */
  const journalBytes = (dir: string): Buffer =>
    Buffer.concat(
      readdirSync(dir)
        .filter((f) => f.startsWith("journal.db"))
        .map((f) => readFileSync(join(dir, f))),
    );

  it("F14: a worker module exporting `secrets`: a tool argument carrying one is stored masked, the tool gets the real value", async () => {
    const dir = tempDir();
    const SECRET = "smtp-Pa55word-8c1f0e";
    const witness = join(tempDir(), "witness.txt");
    // An agent that logs in with the secret from its configuration (never from a stored value).
    const module = join(dir, "mailer.mts");
    writeFileSync(
      module,
      [
        `import { defineAgent } from ${JSON.stringify(join(ROOT, "src", "index.ts"))};`,
        `import { makeTableTools } from ${JSON.stringify(join(ROOT, "test", "support", "table-tools.ts"))};`,
        `export const secrets = { SMTP_PASSWORD: ${JSON.stringify(SECRET)} };`,
        "export const tools = makeTableTools(process.env.HF_WITNESS).all;",
        "export const agents = [defineAgent({ name: 'mailer', version: '1',",
        "  run: async (turn) => turn.tool('record', { label: 'login ' + secrets.SMTP_PASSWORD }) })];",
      ].join("\n"),
    );
    const worker = startWorkerCli(
      ["--store", join(dir, "journal.db"), "--module", module, "--lease-ms", "3000", "--stdin", "--json"],
      { HF_WITNESS: witness },
    );
    try {
      await worker.waitFor("started");
      worker.child.stdin?.write(
        `${JSON.stringify({ chatId: "c", inputId: "i", agent: "mailer", content: null })}\n`,
      );
      expect(await worker.waitFor("settled")).toMatchObject({ status: "completed" });
    } finally {
      worker.child.kill("SIGTERM");
    }
    expect(await worker.exit, worker.stderr()).toEqual({ code: 0, signal: null });
    // The tool ran with the real value (its own witness has it); the journal never stored it.
    expect(readFileSync(witness, "utf8")).toBe(`login ${SECRET}\n`);
    const bytes = journalBytes(dir);
    expect(bytes.includes(SECRET)).toBe(false);
    expect(bytes.includes("login «secret:SMTP_PASSWORD»")).toBe(true);
    expect(JSON.stringify(worker.lines)).not.toContain(SECRET);
  }, 60_000);

  it("F14: a refused input line carrying a secret named by `secretEnv` is printed masked, the reason too", async () => {
    const dir = tempDir();
    const SECRET = "smtp-Env-Pa55word-41d9a2";
    const module = moduleWith(dir, `export const secretEnv = ["SMTP_PASSWORD"];`);
    const worker = startWorkerCli(
      ["--store", join(dir, "journal.db"), "--module", module, "--lease-ms", "3000", "--stdin", "--json"],
      { HF_WITNESS: join(dir, "witness.txt"), SMTP_PASSWORD: SECRET },
    );
    try {
      await worker.waitFor("started");
      // An agent the worker does not have, and a line that is not JSON (whose parse error quotes it).
      worker.child.stdin?.write(
        `${JSON.stringify({ chatId: "c", inputId: "i", agent: "nope", content: SECRET })}\n{"chatId": "c", "content": "${SECRET}"\n`,
      );
      await worker.waitFor("refused", 2);
    } finally {
      worker.child.kill("SIGTERM");
    }
    expect(await worker.exit, worker.stderr()).toEqual({ code: 0, signal: null });
    const refused = worker.lines.filter((l) => l.kind === "refused");
    expect(refused).toHaveLength(2);
    for (const line of refused) {
      expect(JSON.stringify(line)).not.toContain(SECRET);
      expect(String(line.line)).toContain("«secret:SMTP_PASSWORD»");
    }
  }, 60_000);

  it("F14: secrets that are not strings, or a secretEnv variable that is not set, stop the worker with a clear error that prints no value", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const env = { HF_WITNESS: join(dir, "witness.txt") };
    const cases = [
      ["export const secrets = { PIN: 123456 };", "PIN"],
      ['export const secrets = ["hunter2-value"];', "secrets"],
      ['export const secretEnv = ["HF_TEST_UNSET_SECRET_9d1"];', "HF_TEST_UNSET_SECRET_9d1"],
      ['export const secretEnv = "SMTP_PASSWORD";', "secretEnv"],
    ] as const;
    const results = await Promise.all(
      cases.map(([source], i) => {
        const sub = join(dir, `m${i}`);
        mkdirSync(sub);
        return runCli(["worker", "--store", db, "--module", moduleWith(sub, source)], { env });
      }),
    );
    for (const [i, [source, named]] of cases.entries()) {
      const result = results[i]!;
      expect(result.code, source).toBe(1);
      const { reason, hint } = expectTwoLineError(result.stderr);
      expect(reason, source).toContain(named);
      expect(hint, source).toMatch(/secrets|secretEnv/);
      expect(result.stderr).not.toContain("hunter2-value");
      expect(result.stderr).not.toContain("123456");
    }
  }, 60_000);
  it('--stdin lines with `whenBusy: "queue"` wait in their chat\'s queue behind its run, in the order they were written, and run after it; a bad whenBusy is refused', async () => {
    const dir = tempDir();
    const go = join(dir, "go");
    const witness = join(dir, "witness.txt");
    const module = join(dir, "queue-agents.mts");
    // The first run waits for the file `go`, so the later lines find the chat busy.
    writeFileSync(
      module,
      [
        `import { existsSync, appendFileSync } from "node:fs";`,
        `import { Schema } from ${JSON.stringify(join(ROOT, "node_modules", "effect", "dist", "esm", "index.js"))};`,
        `import { defineAgent, defineTool } from ${JSON.stringify(join(ROOT, "src", "index.ts"))};`,
        "const note = defineTool({ name: 'note', args: Schema.Struct({ label: Schema.String }), disposition: 'replay',",
        "  run: async ({ label }) => {",
        `    while (label === 'first' && !existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 20));`,
        `    appendFileSync(${JSON.stringify(witness)}, label + "\\n"); return { label }; } });`,
        "export const tools = [note];",
        "export const agents = [defineAgent({ name: 'noter', version: '1',",
        "  run: async (turn, input) => turn.tool(note, { label: input.label }) })];",
      ].join("\n"),
    );
    const db = join(dir, "journal.db");
    const worker = startWorkerCli(
      ["--store", db, "--module", module, "--lease-ms", "3000", "--stdin", "--json"],
      {},
    );
    const line = (inputId: string, extra: Record<string, unknown> = {}) =>
      `${JSON.stringify({ chatId: "c", inputId, agent: "noter", content: { label: inputId }, ...extra })}\n`;
    try {
      await worker.waitFor("started");
      // Written at once, in one chunk: the worker submits one chat's lines one after the other.
      worker.child.stdin?.write(
        line("first") +
          line("q1", { whenBusy: "queue" }) +
          line("q2", { whenBusy: "queue" }) +
          line("q3", { whenBusy: "queue" }) +
          line("bad", { whenBusy: "later" }),
      );
      await worker.waitFor("queued", 3);
      await worker.waitFor("refused");
      writeFileSync(go, "");
      // The queued runs are started by whoever ends the run before them (here, this worker).
      const until = Date.now() + 30_000;
      while (Date.now() < until && !readFileSync(witness, { encoding: "utf8", flag: "a+" }).includes("q3"))
        await new Promise((r) => setTimeout(r, 20));
    } finally {
      worker.child.kill("SIGTERM");
    }
    expect(await worker.exit, worker.stderr()).toEqual({ code: 0, signal: null });
    const queued = worker.lines.filter((l) => l.kind === "queued");
    expect(queued.map((l) => [l.inputId, l.position])).toEqual([
      ["q1", 1],
      ["q2", 2],
      ["q3", 3],
    ]);
    expect(String(worker.lines.find((l) => l.kind === "refused")?.reason)).toContain("whenBusy");
    expect(readFileSync(witness, "utf8")).toBe("first\nq1\nq2\nq3\n");
    const journal = LibsqlJournal.open(db);
    try {
      const admitted = (await journal.readAll({ after: 0, limit: 1000 }))
        .filter((e) => e.event.type === "run.admitted")
        .map((e) => (e.event as { inputId: string }).inputId);
      expect(admitted).toEqual(["first", "q1", "q2", "q3"]);
    } finally {
      await journal.close();
    }
  }, 60_000);
});
