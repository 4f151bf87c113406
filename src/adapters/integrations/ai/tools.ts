import { AsyncLocalStorage } from "node:async_hooks";
import { type FlexibleSchema, type JSONSchema7, jsonSchema, type Tool, type ToolExecutionOptions } from "ai";
import * as Either from "effect/Either";
import * as JSONSchema from "effect/JSONSchema";
import * as ParseResult from "effect/ParseResult";
import * as Schema from "effect/Schema";
import type { Disposition } from "../../../events/index.js";
import {
  type AnyToolDef,
  type ApprovalSpec,
  defineTool,
  type Reconciler,
  type ToolDef,
  type Turn,
} from "../../../runtime/define.js";

/** The AI SDK's options of the `execute` call in progress, for a tool made by {@link fromAiTool}. */
const executing = new AsyncLocalStorage<ToolExecutionOptions>();

/** What the model is shown of a tool: the AI SDK tool without its `execute`. */
export type AiToolShape<I = unknown> = Omit<Tool<I, unknown>, "execute" | "outputSchema"> & {
  readonly inputSchema: FlexibleSchema<I>;
};

/**
 * A holdfast tool that also carries the shape the AI SDK shows the model. Register it with
 * `openRuntime({ tools })` like any tool; hand it to the model with {@link journaledTools}.
 */
export interface AiToolDef<N extends string = string, A = unknown, I = unknown, R = unknown>
  extends ToolDef<A, I, R> {
  readonly name: N;
  readonly aiTool: AiToolShape<I>;
}

// biome-ignore lint/suspicious/noExplicitAny: a tool definition of any argument and result types
type InputOf<D> = D extends ToolDef<any, infer I, any> ? I : never;
// biome-ignore lint/suspicious/noExplicitAny: a tool definition of any argument and result types
type OutputOf<D> = D extends ToolDef<any, any, infer R> ? R : never;

/** The AI SDK tool set of some holdfast tools, keyed by tool name. */
export type JournaledTools<T extends ReadonlyArray<AnyToolDef>> = {
  [D in T[number] as D["name"]]: Tool<InputOf<D>, OutputOf<D>>;
};

/**
 * The AI SDK input schema of an Effect Schema: its JSON Schema for the model, and a validation that
 * checks the model's input decodes. The input is passed on as the model wrote it (the encoded
 * side): the journaled call decodes it, once.
 *
 * @example
 * const inputSchema = effectInputSchema(Schema.Struct({ city: Schema.String }));
 */
export const effectInputSchema = <A, I>(schema: Schema.Schema<A, I>): FlexibleSchema<I> =>
  jsonSchema<I>(JSONSchema.make(schema) as JSONSchema7, {
    validate: (value) =>
      Either.match(Schema.decodeUnknownEither(schema)(value), {
        onLeft: (error) => ({
          success: false,
          error: new Error(ParseResult.TreeFormatter.formatErrorSync(error)),
        }),
        onRight: () => ({ success: true, value: value as I }),
      }),
  });

const shapes = new WeakMap<AnyToolDef, AiToolShape<unknown>>();

const shapeOf = (def: AnyToolDef): AiToolShape<unknown> => {
  const own = (def as Partial<AiToolDef>).aiTool;
  if (own) return own;
  let shape = shapes.get(def);
  if (!shape) {
    shape = {
      ...(def.description ? { description: def.description } : {}),
      inputSchema: effectInputSchema(def.args) as FlexibleSchema<unknown>,
    };
    shapes.set(def, shape);
  }
  return shape;
};

/**
 * AI SDK tools whose every call is a journaled holdfast tool call of `turn`: intent before the
 * effect, outcome after, and on re-execution the recorded result instead of the effect. Any
 * registered tool works: one made with `defineTool` (its Effect Schema becomes the input schema the
 * model sees) or with {@link fromAiTool}.
 *
 * Each `execute` starts its call before its first `await`, so calls take their seq in the order
 * the AI SDK starts them: the model's tool-call order. A call that fails definitely reaches the
 * model as a tool error (the AI SDK's way); a call left in doubt holds the run, and the next model
 * call of the loop is refused with `RunHeld`.
 *
 * @example
 * const tools = journaledTools(turn, [getWeather, sendEmail]);
 * await generateText({ model: journaledModel(turn, model), tools, stopWhen: stepCountIs(5), prompt });
 */
export const journaledTools = <const T extends ReadonlyArray<AnyToolDef>>(
  turn: Turn,
  defs: T,
): JournaledTools<T> => {
  const tools: Record<string, Tool<unknown, unknown>> = {};
  for (const def of defs) {
    // The approval is holdfast's (decision 0058): the AI SDK's own `needsApproval` would end the
    // loop with an approval request the caller must answer in memory; the journaled call waits
    // durably instead, and `execute` returns once a person approved (or throws ApprovalDenied).
    const { needsApproval: _sdkApproval, ...shape } = shapeOf(def) as AiToolShape<unknown> & {
      needsApproval?: unknown;
    };
    tools[def.name] = {
      ...shape,
      execute: (input: unknown, options: ToolExecutionOptions) =>
        executing.run(options, () => turn.tool(def, input)),
    } as Tool<unknown, unknown>;
  }
  return tools as JournaledTools<T>;
};

/**
 * The holdfast approval of an AI SDK tool's `needsApproval` (decision 0058): `true` asks for every
 * call; a function is asked for each new call with the input and the AI SDK's options of the call
 * in progress, and must answer a boolean at once (a promise is refused: the call takes its place in
 * the journal before any `await`).
 */
const approvalOfSdk = <I>(name: string, needsApproval: unknown): ApprovalSpec<I> | undefined => {
  if (needsApproval === undefined || needsApproval === false) return undefined;
  if (needsApproval === true) return "required";
  if (typeof needsApproval !== "function")
    throw new TypeError(`AI SDK tool "${name}": needsApproval must be a boolean or a function of the input`);
  return (input: I) => {
    const sdk = executing.getStore() ?? { toolCallId: "", messages: [] };
    const answer: unknown = needsApproval(input, sdk);
    if (typeof answer === "boolean") return answer;
    throw new TypeError(
      `AI SDK tool "${name}": needsApproval returned ${answer !== null && typeof answer === "object" && "then" in answer ? "a promise" : typeof answer}; under holdfast it must return a boolean at once (the call is journaled before any await). Decide from the input, or use approval: "required"`,
    );
  };
};

/** How a tool made from an AI SDK tool is recovered. */
export interface FromAiToolOptions<A> {
  /**
   * A person's approval before the effect (decision 0057); default: from the AI SDK tool's
   * `needsApproval` (decision 0058). Give `{ when, editable: true }` to let the approver edit the input.
   */
  readonly approval?: ApprovalSpec<A>;
  /** What recovery may do if a call is found in doubt. Default `hold` (`reconcile` with a reconciler). */
  readonly disposition?: Disposition;
  readonly reconciler?: Reconciler<A>;
  /** The source text the safe list pins. Default: the text of the tool's `execute`. */
  readonly source?: string;
}

/** The last value of a streaming `execute` is its result, as for the AI SDK. */
const finalOutput = async (output: unknown): Promise<unknown> => {
  if (output !== null && typeof output === "object" && Symbol.asyncIterator in output) {
    let last: unknown;
    for await (const value of output as AsyncIterable<unknown>) last = value;
    return last;
  }
  return output;
};

/**
 * A holdfast tool from an AI SDK tool (`tool({ description, inputSchema, execute })`): register it
 * with `openRuntime({ tools })`, hand it to the model with {@link journaledTools}. `execute` runs
 * inside the journaled call and receives the AI SDK's options (`toolCallId`, `messages`,
 * `abortSignal`). Its input was validated by the AI SDK against the tool's own schema; the journal
 * stores it as JSON.
 *
 * @example
 * const getWeather = fromAiTool("get_weather", tool({
 *   description: "The weather in a city",
 *   inputSchema: jsonSchema<{ city: string }>({ type: "object", properties: { city: { type: "string" } } }),
 *   execute: async ({ city }) => weather.lookup(city),
 * }));
 */
export const fromAiTool = <const N extends string, I, R>(
  name: N,
  aiTool: Tool<I, R>,
  options: FromAiToolOptions<I> = {},
): AiToolDef<N, I, I, R> => {
  const { execute, ...shape } = aiTool as Tool<I, R> & {
    execute?: (input: I, options: ToolExecutionOptions) => unknown;
  };
  if (typeof execute !== "function") {
    throw new TypeError(
      `AI SDK tool "${name}" has no execute function: a tool the client runs is not a journaled call; give it an execute, or leave it out of journaledTools`,
    );
  }
  const approval =
    options.approval ?? approvalOfSdk<I>(name, (aiTool as { needsApproval?: unknown }).needsApproval);
  const args = Schema.declare((input: unknown): input is I => input !== undefined, {
    identifier: `${name} input`,
  });
  const def = defineTool<I, I, R>({
    name,
    description: aiTool.description ?? "",
    args,
    ...(options.disposition ? { disposition: options.disposition } : {}),
    ...(options.reconciler ? { reconciler: options.reconciler } : {}),
    ...(approval === undefined ? {} : { approval }),
    source: options.source ?? execute.toString(),
    run: async (input, context) => {
      const sdk = executing.getStore() ?? { toolCallId: context.callId, messages: [] };
      return (await finalOutput(execute.call(aiTool, input, sdk))) as R;
    },
  });
  return { ...def, name, aiTool: shape as AiToolShape<I> };
};
