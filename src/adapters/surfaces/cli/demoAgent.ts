import type { ToolDef } from "../../../runtime/define.js";
import { type AgentDef, defineAgent } from "../../../runtime/define.js";
import type {
  ShellArgs,
  ShellResult,
  WriteFileArgs,
  WriteFileResult,
} from "../../integrations/tools/index.js";

export interface DemoPlanItem {
  readonly id: string;
  readonly title: string;
  readonly done: boolean;
}

export interface DemoPlan {
  readonly goal: string;
  readonly items: ReadonlyArray<DemoPlanItem>;
}

export interface DemoInput {
  readonly topic: string;
}

export interface DemoOutput {
  readonly notes: string;
  readonly notesBytes: number;
  readonly wc: string;
  readonly apiKeyLength: number;
  readonly plan: string;
  readonly stepsDone: number;
  readonly notified: string;
}

/** The model call's name: says in every event that no language model is involved. */
export const SCRIPTED_PLANNER = "scripted-planner";

export const SCRIPTED_PLANNER_LABEL =
  "scripted planner — stands in for a language model (returns a fixed plan, no network)";

/** What the scripted planner returns: the plan a model might make, fixed so the demo is repeatable. */
export const scriptedPlan = (topic: string): DemoPlan => ({
  goal: `Write short notes about ${topic} and check them`,
  items: [
    { id: "write-notes", title: "Write notes.md", done: false },
    { id: "measure-notes", title: "Count the bytes of notes.md with wc", done: false },
    { id: "check-key", title: "Check that the API key is set (its length only)", done: false },
    { id: "notify", title: "Tell the team the notes are ready", done: false },
    { id: "save-plan", title: "Save the finished plan as plan.json", done: false },
  ],
});

const notesFor = (plan: DemoPlan, topic: string): string =>
  [
    `# Notes: ${topic}`,
    "",
    `Goal: ${plan.goal}`,
    "",
    "- Every model and tool call is journaled: the intent before it starts, the outcome after.",
    "- After a crash, calls with a recorded outcome are served from the journal, not run again.",
    "- A call with an intent but no outcome is in doubt: the run is held until a person decides.",
    "",
  ].join("\n");

const markDone = (plan: DemoPlan, id: string): DemoPlan => ({
  ...plan,
  items: plan.items.map((item) => (item.id === id ? { ...item, done: true } : item)),
});

export interface DemoTools {
  readonly writeFile: ToolDef<WriteFileArgs, WriteFileArgs, WriteFileResult>;
  readonly shell: ToolDef<ShellArgs, ShellArgs, ShellResult>;
  /** Stands in for sending a message: no reconciler can prove it, so an in-doubt one is held. */
  readonly notify: ToolDef<NotifyArgs, NotifyArgs, { readonly delivered: true }>;
}

export interface NotifyArgs {
  readonly to: string;
  readonly message: string;
}

/**
 * The demo agent: a scripted planner (a `model` call), then real tools. The API key is passed in a
 * tool argument on purpose: the command runs with the real value, the journal only ever holds
 * `«secret:NAME»`.
 */
export const makeDemoAgent = (
  tools: DemoTools,
  apiKey: { readonly name: string; readonly value: string },
): AgentDef<DemoInput, DemoOutput> =>
  defineAgent({
    name: "demo",
    version: "1",
    run: async (turn, input: DemoInput) => {
      let plan = await turn.model(
        SCRIPTED_PLANNER,
        { instruction: "Plan the steps to write and check short notes", topic: input.topic },
        async () => scriptedPlan(input.topic),
      );

      const notes = await turn.tool(tools.writeFile, {
        path: "notes.md",
        content: notesFor(plan, input.topic),
      });
      plan = markDone(plan, "write-notes");
      await turn.checkpoint({ plan });

      const wc = await turn.tool(tools.shell, { command: "wc -c notes.md" });
      plan = markDone(plan, "measure-notes");
      await turn.checkpoint({ plan });

      const key = await turn.tool(tools.shell, { command: `printf %s '${apiKey.value}' | wc -c` });
      plan = markDone(plan, "check-key");
      await turn.checkpoint({ plan });

      await turn.tool(tools.notify, { to: "team@example.com", message: `notes on ${input.topic} are ready` });
      plan = markDone(plan, "notify");
      await turn.checkpoint({ plan });

      plan = markDone(plan, "save-plan");
      const saved = await turn.tool(tools.writeFile, {
        path: "plan.json",
        content: `${JSON.stringify(plan, null, 2)}\n`,
      });
      await turn.checkpoint({ plan });

      return {
        notes: notes.path,
        notesBytes: notes.bytes,
        wc: wc.stdout.trim().replace(/\s+/g, " "),
        apiKeyLength: Number.parseInt(key.stdout.trim(), 10),
        plan: saved.path,
        stepsDone: plan.items.filter((item) => item.done).length,
        notified: "team@example.com",
      };
    },
  });
