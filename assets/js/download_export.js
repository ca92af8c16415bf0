(file) => {
  // Issue 32: Markdown and JSONL are written when clicked; the handler put the file in the hidden
  // File component (its value is Gradio's file data) and this downloads it, as the old download
  // buttons did (an <a download> on the file's same-origin URL).
  const data = Array.isArray(file) ? file[0] : file;
  if (data && data.url) {
    const a = document.createElement('a');
    a.href = data.url;
    a.download = data.orig_name || '';
    a.style.display = 'none';
    document.body.appendChild(a);
    a.click();
    a.remove();
  }
  return [];
}
