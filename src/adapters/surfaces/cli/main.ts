import { readFileSync, realpathSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { ExitCode, usageError } from "./CliError.js";
import { type Io, Output } from "./Output.js";
import {
  DECISIONS,
  DEFAULT_KEEP_DAYS,
  DEFAULT_KEEP_RUNS,
  DEFAULT_LEASE_MS,
  DEFAULT_PRUNE_BATCH,
  MODEL_ANSWER_HINT,
  parseConcurrency,
  parseExpectHead,
  parseKeepDays,
  parseLeaseMs,
  RUN_STATUSES,
} from "./optionValues.js";

// Each command's module is imported when the command runs, not before: `holdfast --help` loads no
// journal, engine or server code, and `holdfast audit` (whose worker thread has its own copy) only
// what auditing needs.
const commands = {
  allowlist: () => import("./commands/allowlist.js"),
  audit: () => import("./commands/audit.js"),
  backup: () => import("./commands/backup.js"),
  control: () => import("./commands/control.js"),
  signal: () => import("./commands/signal.js"),
  approve: () => import("./commands/approve.js"),
  signalUrl: () => import("./commands/signalUrl.js"),
  decide: () => import("./commands/decide.js"),
  demo: () => import("./commands/demo.js"),
  events: () => import("./commands/events.js"),
  fork: () => import("./commands/fork.js"),
  plan: () => import("./commands/plan.js"),
  prune: () => import("./commands/prune.js"),
  queue: () => import("./commands/queue.js"),
  rebuild: () => import("./commands/rebuild.js"),
  replay: () => import("./commands/replay.js"),
  retry: () => import("./commands/retry.js"),
  runs: () => import("./commands/runs.js"),
  schedules: () => import("./commands/schedules.js"),
  serve: () => import("./commands/serve.js"),
  show: () => import("./commands/show.js"),
  showChat: () => import("./commands/showChat.js"),
  worker: () => import("./commands/worker.js"),
};

const version = (): string => {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../../../package.json", import.meta.url), "utf8")) as {
      version?: string;
    };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
};

const nonNegativeInt =
  (flag: string) =>
  (value: string): number => {
    if (!/^\d+$/.test(value))
      throw new InvalidArgumentError(`${flag} takes a whole number ≥ 0, got "${value}"`);
    return Number(value);
  };

const positiveInt =
  (flag: string) =>
  (value: string): number => {
    if (!/^\d+$/.test(value) || Number(value) < 1)
      throw new InvalidArgumentError(`${flag} takes a whole number ≥ 1, got "${value}"`);
    return Number(value);
  };

const DB_HELP = "journal file (default: $HOLDFAST_STORE, else .holdfast/journal.db)";

interface Streams {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
}

/**
 * Commander prints its own usage errors; this rewrites them into the two lines every holdfast
 * error has, naming the command's help. Help and the version go to the `stdout` main() was given.
 */
const usageOutput = (name: string, { stdout, stderr }: Streams) => ({
  writeOut: (text: string) => {
    stdout.write(text);
  },
  writeErr: (text: string) => {
    stderr.write(text);
  },
  outputError: (text: string, write: (text: string) => void) => {
    const reason = text.trim().replace(/^error:\s*/, "");
    write(`holdfast: ${reason}\nhint: see \`${name} --help\`\n`);
  },
});

const buildProgram = (io: Io, streams: Streams, setCode: (code: number) => void): Command => {
  const { stderr } = streams;
  const program = new Command("holdfast")
    .description("Durable execution for AI-agent runs: inspect the journal, or try the demo.")
    .version(version(), "-V, --version")
    .exitOverride()
    .configureOutput(usageOutput("holdfast", streams))
    .showSuggestionAfterError(true);

  const command = (name: string) =>
    program
      .command(name)
      .exitOverride()
      .configureOutput(usageOutput(`holdfast ${name.split(" ")[0]}`, streams));

  command("demo")
    .description("run a small agent (a scripted planner, then real file and shell tools) on the journal")
    .option("--db <path>", DB_HELP)
    .option("--work <dir>", "work folder for the tools (default: demo-work next to the journal)")
    .option("--json", "print one JSON document instead of text")
    .action(async (options) => setCode(await (await commands.demo()).demoCommand(options, io)));

  command("runs")
    .description(
      "list runs and their status, newest first, one page at a time; search by id, chat, agent, status, time",
    )
    .addOption(new Option("--status <status>", "only runs with this status").choices(RUN_STATUSES))
    .option("--id <prefix>", "only runs whose id starts with this")
    .option("--chat <chatId>", "only the runs of this chat")
    .option("--agent <name[@version]>", "only runs of this agent (any version, or this one)")
    .option("--from <time>", "only runs admitted at this time or after (ISO 8601, e.g. 2026-12-05T06:00:00Z)")
    .option("--to <time>", "only runs admitted before this time")
    .option("--updated", "--from and --to bound the run's last change instead of its admission")
    .option("--limit <n>", "at most this many runs (default 50, at most 500)", positiveInt("--limit"))
    .option("--cursor <cursor>", "the page after (or before) another: the cursor a page prints")
    .option("--db <path>", DB_HELP)
    .option("--json", "print the page's runs as a JSON array instead of a table")
    .action(async (options) => setCode(await (await commands.runs()).runsCommand(options, io)));

  command("show [runId]")
    .description(
      "show a run: its calls, whether each outcome is committed, held reasons, its events; or, with --chat, a chat's runs and its latest checkpoint",
    )
    .option("--chat <chatId>", "show this chat instead of a run")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (runId: string | undefined, options) => {
      if (runId !== undefined && options.chat !== undefined)
        throw usageError("show takes a run id or --chat, not both", "see `holdfast show --help`");
      if (options.chat !== undefined)
        return setCode(await (await commands.showChat()).showChatCommand(options.chat, options, io));
      if (runId === undefined)
        throw usageError("show needs a run id, or --chat <chatId>", "see `holdfast show --help`");
      setCode(await (await commands.show()).showCommand(runId, options, io));
    });

  command("serve")
    .description("serve the Recovery panel, the JSON API and live events (bound to 127.0.0.1; Ctrl-C stops)")
    .option("--port <n>", "the port (0 picks a free one)", nonNegativeInt("--port"), 4640)
    .option("--host <host>", "the address to bind (another than loopback needs HOLDFAST_TOKEN)", "127.0.0.1")
    .option("--token-file <path>", "where the token is kept (default: token next to the journal)")
    .option(
      "--allow-host <host:port>",
      "also answer this Host header (behind a proxy); repeatable",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option("--db <path>", DB_HELP)
    .option(
      "--notify-url <url>",
      "POST a JSON alert here when a run becomes held, crash-looped or stalled (retried, each attempt recorded)",
    )
    .option("--panel-url <url>", "the panel's address alerts link to (default: where this server listens)")
    .option("--json", "print where it listens as one JSON line")
    .action(async (options) => setCode(await (await commands.serve()).serveCommand(options, io)));

  command("events")
    .description("list the journal's events in position order")
    .option("--after <n>", "only events after this position", nonNegativeInt("--after"), 0)
    .option("--limit <n>", "at most this many events", nonNegativeInt("--limit"))
    .option("--follow", "keep printing new events as they are committed (Ctrl-C stops)")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON object per line")
    .action(async (options) => setCode(await (await commands.events()).eventsCommand(options, io)));

  command("audit")
    .description(
      "verify the whole log: chains, run folds, laws, admissions, projections; prints the head digest",
    )
    .option(
      "--expect-head <digest>",
      "report a finding unless the head digest is this (DIGEST or DIGEST@POSITION)",
      parseExpectHead,
    )
    .option(
      "--accept-head",
      "after a deliberate restore: make the current head the anchored one, if the audit finds nothing else",
    )
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (options) => setCode(await (await commands.audit()).auditCommand(options, io, stderr)));

  command("rebuild")
    .description("recompute every projection from the events and replace the stored rows, in one transaction")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (options) => setCode(await (await commands.rebuild()).rebuildCommand(options, io)));

  command("prune")
    .description("remove finished runs beyond the newest N and older than D days (never active or held runs)")
    .option(
      "--keep-runs <n>",
      "keep the newest N finished runs",
      nonNegativeInt("--keep-runs"),
      DEFAULT_KEEP_RUNS,
    )
    .option(
      "--keep-days <days>",
      "keep runs finished within this many days",
      parseKeepDays,
      DEFAULT_KEEP_DAYS,
    )
    .option(
      "--batch <runs>",
      "runs removed per transaction; appends and lease renewals wait for one batch at most",
      positiveInt("--batch"),
      DEFAULT_PRUNE_BATCH,
    )
    .option("--dry-run", "list what would be removed, write nothing")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (options) => setCode(await (await commands.prune()).pruneCommand(options, io, stderr)));

  command("backup <path>")
    .description("write a verified copy of a libSQL journal (VACUUM INTO, mode 0600, never over a file)")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (path: string, options) =>
      setCode(await (await commands.backup()).backupCommand(path, options, io, stderr)),
    );

  command("decide <runId> [decision]")
    .description(
      `record a person's decisions on a held run, per call (--call) or, with one call in doubt, for the run: ${DECISIONS.join(" | ")}`,
    )
    .requiredOption(
      "--based-on <version>",
      "the run's stream version you decided on (`holdfast show` prints it)",
      nonNegativeInt("--based-on"),
    )
    .option(
      "--call <callId decision...>",
      "decide one call in doubt (repeat for each call; all are recorded together)",
    )
    .option(
      "--call-note <callId text...>",
      "why, for one call (repeatable; --note applies to calls without one)",
    )
    .option(
      "--call-result <callId json...>",
      "with confirmed-completed: the result that call produced, as JSON",
    )
    .option("--note <text>", "why; required for confirmed-completed and confirmed-not-completed")
    .option("--result <json>", "with a run-level confirmed-completed: the result the call produced, as JSON")
    .option("--by <name>", "who decides (default: your OS user name)")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .addHelpText(
      "after",
      `
A model call's outcome is its answer. "Run it again" (new-attempt) is the usual choice for one:
it has no effect besides its answer. To confirm it happened instead, give
${MODEL_ANSWER_HINT}, e.g.
  holdfast decide <runId> --based-on <version> --call <callId> confirmed-completed \\
    --note "the provider's log shows it answered" --call-result <callId> '{"text":"Paris is lovely"}'`,
    )
    .action(async (runId: string, decision: string | undefined, options) =>
      setCode(await (await commands.decide()).decideCommand(runId, decision, options, io)),
    );

  command("retry <runId> <callId>")
    .description("allow a definitely failed call of a held run to be tried again, at most N times")
    .requiredOption(
      "--attempts <n>",
      "how many more attempts (at most 3 by default)",
      nonNegativeInt("--attempts"),
    )
    .option("--by <name>", "who grants (default: your OS user name)")
    .option("--note <text>", "why")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (runId: string, callId: string, options) =>
      setCode(await (await commands.retry()).retryCommand(runId, callId, options, io)),
    );

  command("queue <chatId> [inputId] [more]")
    .description(
      "list a chat's queued inputs in order and the run they wait for; `queue withdraw <chatId> <inputId>` withdraws one not admitted yet",
    )
    .option("--by <name>", "with withdraw: who withdraws (default: your OS user name)")
    .option("--reason <text>", "with withdraw: why, recorded with it")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (first: string, second: string | undefined, third: string | undefined, options) => {
      const queue = await commands.queue();
      if (first === "withdraw" && second !== undefined) {
        if (third === undefined)
          throw usageError(
            "queue withdraw needs a chat id and an input id",
            "holdfast queue withdraw <chatId> <inputId>",
          );
        return setCode(await queue.withdrawCommand(second, third, options, io));
      }
      if (second !== undefined)
        throw usageError(
          `queue takes one chat id, got "${first}" "${second}"`,
          "holdfast queue <chatId>, or holdfast queue withdraw <chatId> <inputId>",
        );
      return setCode(await queue.queueCommand(first, options, io));
    });
  command("schedules [action] [scheduleId]")
    .description(
      "list schedules (next and last tick, paused); `schedules add <id>` makes or changes one, `pause`, `resume` and `delete` change one",
    )
    .option("--cron <pattern>", "with add: a cron pattern (5 fields, or 6 with seconds first)")
    .option("--every <period>", "with add: a period instead of a pattern: 30s, 5m, 1h, 1d or milliseconds")
    .option("--timezone <zone>", "with add: the IANA time zone the pattern is read in (default UTC)")
    .option("--agent <name>", "with add: the agent each tick's run is for")
    .option(
      "--agent-version <version>",
      "with add: admit each tick with this agent version (default: the newest of the worker that admits it)",
    )
    .option("--input <json>", "with add: each tick's run input, as JSON (default null)")
    .option("--overlap <mode>", "with add: skip (default) or queue a tick while the previous run is active")
    .option(
      "--catch-up <mode>",
      "with add: latest (default) or none: which ticks missed while no worker ran are admitted",
    )
    .option("--paused", "with add: make it paused")
    .option("--all", "list deleted schedules too")
    .option("--by <name>", "who changes it (default: your OS user name)")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (action: string | undefined, scheduleId: string | undefined, options) => {
      const schedules = await commands.schedules();
      if (action === undefined || action === "list")
        return setCode(await schedules.schedulesCommand(options, io));
      const actions = ["add", "upsert", "pause", "resume", "delete"];
      if (!actions.includes(action))
        throw usageError(
          `schedules takes list, add, upsert, pause, resume or delete, got "${action}"`,
          "holdfast schedules, or holdfast schedules add ID --every 5m --agent NAME",
        );
      if (scheduleId === undefined)
        throw usageError(`schedules ${action} needs a schedule id`, `holdfast schedules ${action} ID`);
      if (action === "add" || action === "upsert")
        return setCode(await schedules.upsertCommand(scheduleId, options, io));
      return setCode(
        await schedules.changeCommand(action as "pause" | "resume" | "delete", scheduleId, options, io),
      );
    });
  for (const [action, description] of [
    [
      "cancel",
      "stop a run from any process: it starts no new call, in-flight calls are aborted, and it ends cancelled (a held run takes the stop decision; a finished run is a no-op that says so)",
    ],
    [
      "pause",
      "park a running run before its next call; in-flight calls settle; it stays paused across restarts until resumed",
    ],
    ["resume", "continue a paused run: a runtime with its agent re-executes it from the journal"],
  ] as const) {
    const cmd = command(`${action} <runId>`)
      .description(description)
      .option("--by <name>", "who asks (default: your OS user name)");
    if (action !== "resume") cmd.option("--note <text>", "why");
    cmd
      .option("--db <path>", DB_HELP)
      .option("--json", "print one JSON document instead of text")
      .action(async (runId: string, options) =>
        setCode(await (await commands.control()).controlCommand(action, runId, options, io)),
      );
  }

  command("fork <runId>")
    .description(
      "start a new run from a call of <runId>: the calls before --at reuse its recorded outcomes (their effects never run again), the rest run live; the source run is not touched",
    )
    .requiredOption("--at <seq>", "the seq of the first call that runs live (as `holdfast show` lists them)")
    .option(
      "--outcome <seq=json>",
      "an outcome given in place of the recorded one (needed for a call in doubt), recorded as an edit; repeatable",
      (value: string, previous: string[] = []) => [...previous, value],
    )
    .option("--input <json>", "the fork's input (default: the source run's recorded input)")
    .option("--chat <chatId>", "the chat the fork runs in (default: the source run's)")
    .option("--input-id <id>", "the fork's input id: the same id again is the same fork (default: a new one)")
    .option(
      "--agent-version <version>",
      "run another version of the agent (default: the one that ran the source)",
    )
    .addOption(
      new Option("--when-busy <rule>", "when the chat has an active run (as submit)")
        .choices(["refuse", "queue", "interrupt"])
        .default("refuse"),
    )
    .option(
      "--module <path>",
      "the ES module exporting `agents` and `tools`: the fork runs here until it settles (without it, it is recorded and a worker continues it)",
    )
    .option("--by <name>", "who forks (default: your OS user name)")
    .option("--note <text>", "why (required)")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (runId: string, options) =>
      setCode(await (await commands.fork()).forkCommand(runId, options, io)),
    );

  command("signal <runId> <name>")
    .description(
      "send a signal to a run: recorded once per --signal-id, buffered until a turn.waitFor(name) takes it; a run waiting for it is woken by any worker with its agent; refused for a run that ended",
    )
    .option("--payload <json>", "the payload, JSON (default: null)")
    .option("--payload-file <path>", "the payload from a file of JSON")
    .option("--signal-id <id>", "the signal's id: the same id again is accepted and writes nothing")
    .option("--by <name>", "who sends it (default: your OS user name)")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (runId: string, name: string, options) =>
      setCode(await (await commands.signal()).signalCommand(runId, name, options, io)),
    );

  for (const [action, description] of [
    [
      "approve",
      "approve a tool call that awaits approval (its call id or seq): the run is woken by any worker with its agent and the effect starts then, once",
    ],
    [
      "deny",
      "deny a tool call that awaits approval: its effect never starts; the agent sees ApprovalDenied with your note",
    ],
  ] as const) {
    const cmd = command(`${action} <runId> <call>`)
      .description(description)
      .requiredOption(
        "--based-on <version>",
        "the run's stream version you decided on (`holdfast show` prints it)",
        nonNegativeInt("--based-on"),
      )
      .option("--note <text>", action === "deny" ? "why (required: the agent sees it)" : "why");
    if (action === "approve")
      cmd
        .option("--args <json>", "run with these arguments instead (an editable tool only; needs --note)")
        .option("--args-file <path>", "the edited arguments from a file of JSON");
    cmd
      .option("--by <name>", "who decides (default: your OS user name)")
      .option("--db <path>", DB_HELP)
      .option("--json", "print one JSON document instead of text")
      .action(async (runId: string, call: string, options) =>
        setCode(await (await commands.approve()).approveCommand(action, runId, call, options, io)),
      );
  }

  command("signal-url <runId> <name>")
    .description(
      "print the URL a webhook posts to, recording signal <name> to <runId> through `holdfast serve`: it carries its own secret (from the server's token) and allows nothing else",
    )
    .option("--base <url>", "where the sender reaches the server", "http://127.0.0.1:4640")
    .option("--token-file <path>", "the server's token file (default: token next to the journal)")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (runId: string, name: string, options) =>
      setCode(await (await commands.signalUrl()).signalUrlCommand(runId, name, options, io)),
    );

  command("plan <chatId> [action]")
    .description("show a chat's plan and its revision; `replace` replaces it if it is still at that revision")
    .option(
      "--expected-revision <r>",
      "with replace: the revision you edited",
      nonNegativeInt("--expected-revision"),
    )
    .option("--file <path>", "with replace: the new plan, JSON { title, items: [{ id, text, done }] }")
    .option("--by <name>", "with replace: who edits (default: your OS user name)")
    .option("--db <path>", DB_HELP)
    .option("--json", "print one JSON document instead of text")
    .action(async (chatId: string, action: string | undefined, options) =>
      setCode(await (await commands.plan()).planCommand(chatId, action, options, io)),
    );

  const allowlist = command("allowlist").description(
    "the safe list (holdfast.allowlist.json): tools whose in-doubt calls may be replayed, pinned to their source",
  );
  allowlist
    .command("add <tool>")
    .description("pin a tool's current source in the safe list (you audited that running it twice is safe)")
    .exitOverride()
    .configureOutput(usageOutput("holdfast allowlist add", streams))
    .requiredOption("--module <path>", "the ES module that exports the tool definition")
    .option("--file <path>", "the safe list file (default: ./holdfast.allowlist.json)")
    .option(
      "--run-text-only",
      "list a replay tool whose pin covers only the text of its run function (no moduleSource), on purpose",
    )
    .option("--json", "print one JSON document instead of text")
    .action(async (tool: string, options) =>
      setCode(await (await commands.allowlist()).allowlistAddCommand(tool, options, io)),
    );
  allowlist
    .command("check")
    .description("compare every listed tool's pin with its current source; exit 1 on any difference")
    .exitOverride()
    .configureOutput(usageOutput("holdfast allowlist check", streams))
    .requiredOption("--module <path>", "the ES module that exports the tool definitions")
    .option("--file <path>", "the safe list file (default: ./holdfast.allowlist.json)")
    .option("--json", "print one JSON document instead of text")
    .action(async (options) =>
      setCode(await (await commands.allowlist()).allowlistCheckCommand(options, io)),
    );

  command("replay")
    .description(
      "before a deploy: re-execute recorded runs against your agents' current code, every call served from the journal and no effect started; exit 1 on a divergence",
    )
    .option("--agents <module>", "the ES module that exports the `agents` (and `tools`, `secrets`) to check")
    .option("--db <path>", DB_HELP)
    .option("--store <url>", "journal file or postgres:// URL (the same as --db)")
    .option("--run <runId>", "only this run; repeatable", (value: string, previous: string[] = []) => [
      ...previous,
      value,
    ])
    .option(
      "--since <time>",
      "only runs admitted at this time or after (ISO 8601, e.g. 2026-12-05T06:00:00Z)",
    )
    .addOption(
      new Option("--status <status...>", "only runs with one of these statuses").choices(RUN_STATUSES),
    )
    .option("--json", "print one JSON document instead of a table")
    .action(async (options) => {
      setCode(await (await commands.replay()).replayCommand(options, io, stderr));
      // The agents' module may leave timers or sockets open (a replay never waits on them): once
      // the report is out, the command exits instead of hanging on them (see `exitWhenAsked`).
      exitAsked = true;
    });

  command("worker")
    .description(
      "run as a long-lived worker: recover runs whose owner died, keep looking every half lease, until SIGINT/SIGTERM",
    )
    .option(
      "--store <url>",
      "journal file or postgres:// URL (default: $HOLDFAST_STORE, else .holdfast/journal.db)",
    )
    .option("--db <url>", "the same as --store, as every other command names it")
    .option("--worker-id <id>", "this worker's id (default: $HOLDFAST_WORKER_ID, else <host>:<pid>:<random>)")
    .option("--lease-ms <n>", "ownership lease, renewed every third of it", parseLeaseMs, DEFAULT_LEASE_MS)
    .option("--module <path>", "the ES module that exports the `agents` and `tools` arrays this worker runs")
    .option("--allowlist <file>", "the safe list (default: ./holdfast.allowlist.json when present)")
    .option("--concurrency <n>", "recovered runs executed at once", parseConcurrency, 2)
    .option(
      "--stdin",
      "also admit inputs from standard input, one JSON object per line: {chatId, inputId, agent, content}",
    )
    .option(
      "--notify-url <url>",
      "POST a JSON alert here when a run becomes held, crash-looped or stalled (retried, each attempt recorded)",
    )
    .option("--panel-url <url>", "the panel's address alerts link to (e.g. http://127.0.0.1:4640)")
    .addOption(
      new Option(
        "--preflight <mode>",
        "report: start anyway, a tool whose safe-list pin does not match loses replay; refuse: do not start",
      )
        .choices(["report", "refuse"])
        .default("report"),
    )
    .option("--json", "print one JSON object per line")
    .action(async (options) => setCode(await (await commands.worker()).workerCommand(options, io)));

  return program;
};

/** Exit codes of commander's own outcomes: help and version are fine, the rest is misuse. */
const commanderExit = (error: CommanderError): number => {
  if (error.code === "commander.helpDisplayed" || error.code === "commander.version") return ExitCode.ok;
  if (error.code === "commander.help") return error.exitCode === 0 ? ExitCode.ok : ExitCode.usage;
  return ExitCode.usage;
};

/**
 * Run `holdfast` with `argv` (without the node and script paths) and return the exit code. Never
 * throws and never prints a stack trace: failures are two lines on stderr, `holdfast: <reason>` and
 * `hint: <what to do>`.
 */
export async function main(argv: string[], streams: Streams = process): Promise<number> {
  if (streams.stdout === process.stdout) ignoreClosedPipe();
  const io: Io = { out: new Output(streams.stdout) };
  let code: number = ExitCode.ok;
  const program = buildProgram(io, streams, (value) => {
    code = value;
  });
  if (argv.length === 0) {
    streams.stderr.write(`${program.helpInformation()}\n`);
    const { failureLines } = await import("./failure.js");
    streams.stderr.write(
      failureLines({
        exitCode: ExitCode.usage,
        reason: "no command given",
        hint: "try `holdfast demo`, then `holdfast runs`",
      }),
    );
    return ExitCode.usage;
  }
  try {
    await program.parseAsync(argv, { from: "user" });
    return code;
  } catch (error) {
    if (error instanceof CommanderError) return commanderExit(error);
    const { describeFailure, failureLines } = await import("./failure.js");
    const failure = describeFailure(error);
    streams.stderr.write(failureLines(failure));
    return failure.exitCode;
  }
}

let exitAsked = false;

/**
 * For the program's entry point, after `main`: end the process once its output is flushed when the
 * command asked to (`replay`, whose agents' module may leave timers or sockets open). A process
 * with nothing left open ends by itself first; `main` called from code is never ended.
 */
export const exitWhenAsked = (): void => {
  if (exitAsked) setTimeout(() => process.exit(), 200).unref();
};

let pipeGuarded = false;
/** `holdfast events | head` closes the pipe early: the reader's choice, not an error to report. */
const ignoreClosedPipe = (): void => {
  if (pipeGuarded) return;
  pipeGuarded = true;
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error;
    process.exit(process.exitCode ?? 0);
  });
};

const isEntryPoint = (): boolean => {
  const script = process.argv[1];
  if (!script) return false;
  try {
    return realpathSync(script) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
};

if (isEntryPoint()) {
  process.exitCode = await main(process.argv.slice(2));
  exitWhenAsked();
}
