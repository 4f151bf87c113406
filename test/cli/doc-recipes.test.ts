import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BIN, ROOT, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();

/**
 * docs/cli.md's crash experiments, run as written: each command of each `sh` block under "The
 * crash experiment", in a fresh folder (the default journal `.holdfast/journal.db` and its
 * `demo-work`), `npx holdfast` being `bin/holdfast.js` of this checkout. The placeholders the
 * reader fills in (`<the held run>`, `<version>`, `<run>`) are filled from what the commands
 * printed before them; `cat` and `grep -c` read the outbox the way the reader would, and a `grep -c`
 * whose comment gives a count is checked against it. Then the outbox must hold the message once.
 */
const CLI_DOC = join(ROOT, "docs", "cli.md");

/** The `sh` blocks of the section `### The crash experiment`, each as its commands. */
const crashExperimentRecipes = (): string[][] => {
  const doc = readFileSync(CLI_DOC, "utf8");
  const start = doc.indexOf("### The crash experiment");
  if (start < 0) throw new Error("docs/cli.md has no section 'The crash experiment'");
  const end = doc.indexOf("\n## ", start);
  const section = doc.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((block) =>
    block[1]!
      .replace(/\\\n\s*/g, "") // continuation lines
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line !== ""),
  );
};

/** Split a command line the way sh would for these lines: words, quotes, a trailing comment. */
const words = (line: string): { words: string[]; comment: string } => {
  const out: string[] = [];
  let current: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '"' || c === "'") {
      const close = line.indexOf(c, i + 1);
      if (close < 0) throw new Error(`unclosed quote in: ${line}`);
      current = (current ?? "") + line.slice(i + 1, close);
      i = close;
    } else if (c === " ") {
      if (current !== undefined) out.push(current);
      current = undefined;
    } else if (c === "#" && current === undefined) {
      return { words: out, comment: line.slice(i + 1).trim() };
    } else current = (current ?? "") + c;
  }
  if (current !== undefined) out.push(current);
  return { words: out, comment: "" };
};

interface Ran {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** `holdfast args` from `bin/holdfast.js` in `cwd`, as `npx holdfast` runs it in a checkout. */
const holdfast = (cwd: string, args: ReadonlyArray<string>, env: Record<string, string>): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: { ...process.env, HOLDFAST_STORE: "", HOLDFAST_CRASH_AT: "", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });

/** What the reader knows after each command: the held run, its version. */
interface Known {
  heldRun?: string;
  version?: number;
}

const fill = (word: string, known: Known): string =>
  word.replace(/<the held run>|<run>|<version>/g, (placeholder) => {
    const value = placeholder === "<version>" ? known.version : known.heldRun;
    if (value === undefined) throw new Error(`${placeholder} is used before a command printed it`);
    return String(value);
  });

/** Run one recipe in `dir`; returns the transcript (for failures) and the held run's id. */
const runRecipe = async (dir: string, recipe: ReadonlyArray<string>) => {
  const known: Known = {};
  const transcript: string[] = [];
  const outbox = join(dir, ".holdfast", "demo-work", "outbox.txt");
  for (const line of recipe) {
    // Placeholders inside quotes are part of a word; fill them after the split.
    const parsed = words(line.replace(/<the held run>/g, "<the-held-run>"));
    const all = parsed.words.map((w) => w.replace("<the-held-run>", "<the held run>"));
    const env: Record<string, string> = {};
    while (all[0] && /^[A-Z_]+=/.test(all[0])) {
      const [name, ...value] = all.shift()!.split("=");
      env[name!] = value.join("=");
    }
    const [program, ...rest] = all;
    if (program === "npx" && rest[0] === "holdfast") {
      const args = rest.slice(1).map((w) => fill(w, known));
      const ran = await holdfast(dir, args, env);
      transcript.push(`$ ${line}\n${ran.stdout}${ran.stderr}[exit ${ran.code ?? ran.signal}]`);
      if (env.HOLDFAST_CRASH_AT) {
        expect(ran.signal, transcript.join("\n")).toBe("SIGKILL");
        continue;
      }
      expect(ran.stderr, transcript.join("\n")).not.toMatch(/unexpected|please report/i);
      expect(ran.code === 0 || (args[0] === "demo" && ran.code === 1), transcript.join("\n")).toBe(true);
      // What the reader reads off: the held run the demo names (or `runs --status held` lists), its
      // version from `show`.
      const heldByDemo = args[0] === "demo" ? /held: (\S+) /.exec(ran.stdout)?.[1] : undefined;
      if (heldByDemo) known.heldRun = heldByDemo;
      if (args[0] === "runs" && args.includes("held")) {
        const held = await holdfast(dir, [...args, "--json"], {});
        const runs = JSON.parse(held.stdout) as Array<{ runId: string }>;
        expect(runs, transcript.join("\n")).toHaveLength(1);
        known.heldRun = runs[0]!.runId;
        expect(ran.stdout).toContain(known.heldRun);
      }
      if (args[0] === "show") {
        const shown = await holdfast(dir, [...args, "--json"], {});
        known.version = (JSON.parse(shown.stdout) as { run: { version: number } }).run.version;
        expect(ran.stdout).toContain(String(known.version));
      }
    } else if (program === "cat") {
      const file = join(dir, fill(rest[0]!, known));
      transcript.push(`$ ${line}\n${existsSync(file) ? readFileSync(file, "utf8") : "(no such file)"}`);
    } else if (program === "grep" && rest[0] === "-c") {
      const pattern = fill(rest[1]!, known);
      const text = readFileSync(join(dir, rest[2]!), "utf8");
      const count = text.split("\n").filter((l) => l.includes(pattern)).length;
      transcript.push(`$ ${line}\n${count}`);
      const said = /^(\d+):/.exec(parsed.comment);
      if (said) expect(count, transcript.join("\n")).toBe(Number(said[1]));
    } else {
      throw new Error(`docs/cli.md's crash experiment has a command this test does not know: ${line}`);
    }
  }
  return { transcript: transcript.join("\n"), heldRun: known.heldRun, outbox };
};

describe("docs/cli.md's crash experiments, run as written", () => {
  const recipes = crashExperimentRecipes();

  it("the section has the two recipes: a crash after the effect and one before it", () => {
    expect(recipes).toHaveLength(2);
    expect(recipes[0]![0]).toContain("HOLDFAST_CRASH_AT=after-effect-before-outcome");
    expect(recipes[1]![0]).toContain("HOLDFAST_CRASH_AT=after-intent");
  });

  it("crash after the effect: the decision the doc teaches leaves the message sent exactly once, and the run completes", async () => {
    const dir = tempDir();
    const { transcript, heldRun, outbox } = await runRecipe(dir, recipes[0]!);
    expect(heldRun, transcript).toBeDefined();
    const lines = readFileSync(outbox, "utf8").split("\n");
    expect(
      lines.filter((l) => l.includes(`${heldRun}/`)),
      transcript,
    ).toHaveLength(1);
    const status = await holdfast(dir, ["show", heldRun!, "--json"], {});
    expect((JSON.parse(status.stdout) as { run: { status: string } }).run.status, transcript).toBe(
      "completed",
    );
  }, 120_000);

  it("crash before the effect: the decision the doc teaches sends the message once, as the next attempt, and the run completes", async () => {
    const dir = tempDir();
    const { transcript, heldRun, outbox } = await runRecipe(dir, recipes[1]!);
    expect(heldRun, transcript).toBeDefined();
    const lines = readFileSync(outbox, "utf8").split("\n");
    const mine = lines.filter((l) => l.includes(`${heldRun}/`));
    expect(mine, transcript).toHaveLength(1);
    expect(mine[0], transcript).toMatch(/#2$/);
    const status = await holdfast(dir, ["show", heldRun!, "--json"], {});
    expect((JSON.parse(status.stdout) as { run: { status: string } }).run.status, transcript).toBe(
      "completed",
    );
  }, 120_000);
});
