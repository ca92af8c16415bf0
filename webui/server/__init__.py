"""Layer ``server`` (beside ``text``): the HTTP side of the web UI — the Host/Origin guard, the private
temp folder, the offline environment and the launcher's start-up checks. No Gradio components."""
