/**
 * The questions asked in a terminal, with @clack/prompts: only for what the flags left out.
 */
import * as clack from "@clack/prompts";
import { ScaffoldError } from "./errors.js";
import { TEMPLATE_DESCRIPTIONS, TEMPLATE_NAMES, type TemplateName } from "./scaffold.js";

/** Asks for what is missing; each question resolves with the answer or throws a ScaffoldError when cancelled. */
export interface Prompter {
  start(): void;
  packageName(options: { defaultName: string; validate: (name: string) => string | undefined }): Promise<string>;
  template(): Promise<TemplateName>;
  finish(message: string): void;
}

/** The terminal prompter. */
export function clackPrompter(): Prompter {
  return {
    start: () => clack.intro("create-fabric-handler"),
    async packageName({ defaultName, validate }) {
      const answer = await clack.text({
        message: "Package name",
        placeholder: defaultName,
        defaultValue: defaultName,
        validate: (value) => validate(value === undefined || value === "" ? defaultName : value),
      });
      return answered(answer);
    },
    async template() {
      const answer = await clack.select<TemplateName>({
        message: "Template",
        options: TEMPLATE_NAMES.map((name) => ({ value: name, label: name, hint: TEMPLATE_DESCRIPTIONS[name] })),
        initialValue: "atomic",
      });
      return answered(answer);
    },
    finish: (message) => clack.outro(message),
  };
}

function answered<T>(answer: T): Exclude<T, symbol> {
  if (clack.isCancel(answer)) throw new ScaffoldError("cancelled: nothing was created");
  return answer as Exclude<T, symbol>;
}
