/**
 * holdfast/ai — the Vercel AI SDK (v6) on a holdfast turn: every model call and every tool call of
 * `generateText` / `streamText` journaled, reused after a crash, held when in doubt.
 *
 * @example
 * import { generateText, stepCountIs } from "ai";
 * import { journaledModel, journaledTools } from "holdfast/ai";
 *
 * const agent = defineAgent({
 *   name: "weather",
 *   version: "1",
 *   run: async (turn, input: { question: string }) => {
 *     const model = journaledModel(turn, openai("gpt-5"));
 *     const tools = journaledTools(turn, [getWeather]);
 *     const { text } = await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: input.question });
 *     return text;
 *   },
 * });
 */
export {
  type AiToolDef,
  type AiToolShape,
  effectInputSchema,
  type FromAiToolOptions,
  fromAiTool,
  type JournaledTools,
  journaledMiddleware,
  journaledModel,
  journaledTools,
  type LanguageModelV3,
  type ModelPolicy,
  refusedRequest,
} from "./adapters/integrations/ai/index.js";
