// placeholder: filled in by issue 35
export {};
