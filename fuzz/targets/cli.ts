import { Writable } from "node:stream";
import fc from "fast-check";
import { main } from "../../src/adapters/surfaces/cli/main.js";
import { hostile, name } from "../hostile.js";
import { givenJournal, journalHead } from "../journal.js";
import { FuzzFailure, type FuzzTarget, PartialWrite } from "../target.js";

const COMMANDS = [
  "demo",
  "runs",
  "show",
  "events",
  "audit",
  "rebuild",
  "prune",
  "backup",
  "decide",
  "retry",
  "plan",
  "allowlist",
  "add",
  "check",
  "help",
  "--help",
  "-V",
];
const FLAGS = [
  "--accept-head",
  "--after",
  "--allowlist",
  "--attempts",
  "--based-on",
  "--by",
  "--call",
  "--call-note",
  "--call-result",
  "--chat",
  "--db",
  "--dry-run",
  "--expect-head",
  "--expected-revision",
  "--file",
  "--json",
  "--keep-days",
  "--keep-runs",
  "--limit",
  "--module",
  "--note",
  "--result",
  "--status",
  "--store",
  "--work",
  "--",
  "-h",
];
/** What would not return (a server, a worker, a follower) or read this process's stdin. */
const LONG_RUNNING = new Set(["serve", "worker", "--follow", "-f", "--stdin", "-"]);

type Token =
  | { readonly kind: "command"; readonly value: string }
  | { readonly kind: "flag"; readonly value: string }
  | { readonly kind: "db" | "run" | "call" | "version" }
  | { readonly kind: "text"; readonly value: string };

const value: fc.Arbitrary<Token> = fc.oneof(
  fc.record({ kind: fc.constantFrom("db" as const, "run" as const, "call" as const, "version" as const) }),
  {
    arbitrary: fc.record({
      kind: fc.constant("text" as const),
      value: fc.oneof(
        name,
        fc.string({ unit: "binary", maxLength: 32 }),
        fc.constantFrom(
          "0",
          "-1",
          "1e9",
          "NaN",
          "stop",
          "resume",
          "confirmed-completed",
          "replace",
          "{}",
          "null",
          "[1]",
          "--=",
          "--db=",
        ),
        hostile.map((v) => String(typeof v === "symbol" ? "s" : safeString(v))),
      ),
    }),
    weight: 3,
  },
);

const token: fc.Arbitrary<Token> = fc.oneof(
  fc.record({ kind: fc.constant("command" as const), value: fc.constantFrom(...COMMANDS) }),
  {
    arbitrary: fc.record({ kind: fc.constant("flag" as const), value: fc.constantFrom(...FLAGS) }),
    weight: 2,
  },
  { arbitrary: value, weight: 3 },
);

const safeString = (value: unknown): string => {
  try {
    return String(value);
  } catch {
    return "?";
  }
};

const capture = () => {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(Buffer.from(chunk));
      done();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
};

/**
 * `holdfast` argument handling, in process: any argv (commands, flags and values mixed, hostile
 * text) returns from main() with exit code 0–3 and never a stack trace on stderr, and a command
 * that exits non-zero leaves the fuzz journal's head as it was (no partial write). Paths are the
 * fuzz journal or names without separators, inside the fuzz folder.
 */
export const cliTarget: FuzzTarget = {
  name: "cli",
  defaultRuns: 40_000,
  setup: async () => {
    const given = await givenJournal();
    const db = given.db;
    await given.runtime.close();
    // The CLI opens the journal itself; this connection reads its head before and after each argv.
    const head = journalHead(db);
    const savedCwd = process.cwd();
    const savedStore = process.env.HOLDFAST_STORE;
    process.chdir(given.dir);
    process.env.HOLDFAST_STORE = "";
    return {
      arbitrary: fc
        .oneof(
          { arbitrary: fc.array(token, { maxLength: 8 }), weight: 1 },
          {
            // A command, its positional values, then flags with values: gets past the parser more often.
            arbitrary: fc
              .tuple(
                fc.constantFrom(...COMMANDS.filter((c) => !c.startsWith("-"))),
                fc.array(value, { maxLength: 2 }),
                fc.array(fc.tuple(fc.constantFrom(...FLAGS), fc.option(value)), { maxLength: 4 }),
                fc.boolean(),
              )
              .map(([command, positional, flags, withDb]): Token[] => [
                { kind: "command", value: command },
                ...(command === "allowlist" ? [{ kind: "command" as const, value: "check" }] : []),
                ...positional,
                ...flags.flatMap(([flag, v]) => [{ kind: "flag" as const, value: flag }, ...(v ? [v] : [])]),
                ...(withDb ? [{ kind: "flag" as const, value: "--db" }, { kind: "db" as const }] : []),
              ]),
            weight: 3,
          },
        )
        .map((tokens) =>
          tokens
            .map((t) => {
              switch (t.kind) {
                case "db":
                  return db;
                case "run":
                  return given.doubt.runId;
                case "call":
                  return given.doubt.callId;
                case "version":
                  return "3";
                default:
                  return t.value;
              }
            })
            // No separators: a generated path stays in the fuzz folder.
            .filter(
              (arg) =>
                !LONG_RUNNING.has(arg) &&
                !LONG_RUNNING.has(arg.split("=")[0]!) &&
                (arg === db || !/[/\\]/.test(arg)),
            ),
        ),
      check: async (argv: string[]) => {
        const stdout = capture();
        const stderr = capture();
        const savedExit = process.exit;
        process.exit = ((code?: number) => {
          throw new FuzzFailure(`process.exit(${code}) called`);
        }) as typeof process.exit;
        const before = await head();
        let code: number;
        try {
          code = await main([...argv], { stdout: stdout.stream, stderr: stderr.stream });
        } finally {
          process.exit = savedExit;
          process.exitCode = undefined;
          if (process.cwd() !== given.dir) process.chdir(given.dir);
        }
        const err = stderr.text();
        if (![0, 1, 2, 3].includes(code)) throw new FuzzFailure(`exit code ${code}:\n${err}`);
        if (/\n\s+at .+:\d+:\d+\)?/.test(err) || err.includes("this is unexpected"))
          throw new FuzzFailure(`stderr has a stack trace or an internal error:\n${err}`);
        if (code !== 0 && (await head()) !== before)
          throw new PartialWrite(`exit code ${code}, but the journal's head changed:\n${err}`);
        return `exit ${code}`;
      },
      secretsLeft: given.secretsLeft,
      close: async () => {
        head.close();
        process.chdir(savedCwd);
        if (savedStore === undefined) delete process.env.HOLDFAST_STORE;
        else process.env.HOLDFAST_STORE = savedStore;
        await given.close().catch(() => undefined);
      },
    };
  },
};
