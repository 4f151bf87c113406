export {
  journaledMiddleware,
  journaledModel,
  type LanguageModelV3,
  type ModelPolicy,
} from "./middleware.js";
export { refusedRequest } from "./refusal.js";
export {
  type AiToolDef,
  type AiToolShape,
  effectInputSchema,
  type FromAiToolOptions,
  fromAiTool,
  type JournaledTools,
  journaledTools,
} from "./tools.js";
