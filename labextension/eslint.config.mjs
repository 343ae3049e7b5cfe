// Lint rules for the panel and renderer: typed code, no `any`, no innerHTML from data.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['lib/**', 'node_modules/**', '../ipython_compact/**'] },
  js.configs.recommended,
  ...tseslint.configs.strict,
  {
    files: ['src/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'error',
      'no-console': ['error', { allow: ['warn', 'error'] }],
      eqeqeq: 'error',
      'no-restricted-properties': [
        'error',
        { property: 'innerHTML', message: 'Build DOM nodes and set textContent; never parse data as HTML.' },
        { property: 'outerHTML', message: 'Build DOM nodes and set textContent; never parse data as HTML.' }
      ],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.property.name='insertAdjacentHTML']", message: 'No HTML from data.' }
      ]
    }
  },
  {
    // Unit tests may assert that a value they just set up is there.
    files: ['tests/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' }
  }
);
