export { HoldfastSaver, type HoldfastSaverOptions } from "./HoldfastSaver.js";
