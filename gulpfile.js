const { src, dest, parallel } = require('gulp');

// tsc emits only JavaScript; n8n loads icons and codex files from dist/ next to the code.
function nodeAssets() {
	return src('nodes/**/*.{png,svg,json}').pipe(dest('dist/nodes'));
}

function credentialIcons() {
	return src('credentials/**/*.{png,svg}').pipe(dest('dist/credentials'));
}

// The jobs dashboard page (Job Status → Dashboard Page reads these next to its compiled script).
function dashboardPage() {
	return src('dashboard/*.{html,css}').pipe(dest('dist/dashboard'));
}

exports['build:assets'] = parallel(nodeAssets, credentialIcons, dashboardPage);
exports['build:icons'] = exports['build:assets'];
