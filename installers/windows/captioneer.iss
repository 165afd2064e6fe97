; Inno Setup 6 script for Captioneer on Windows (x64). UNTESTED: written against the Inno Setup
; documentation, not yet compiled or run; see installers/README.md.
;
; Build the onedir first (installers/README.md, "Windows"), then from the repository root:
;   iscc /DAppVersion=0.1.0 installers\windows\captioneer.iss
; Output: installers\build\captioneer-0.1.0-windows-x64-setup.exe

#ifndef AppVersion
  #error Pass the version: iscc /DAppVersion=X.Y.Z installers\windows\captioneer.iss
#endif
#ifndef BundleDir
  #define BundleDir "..\..\dist\captioneer"
#endif

[Setup]
; AppId identifies the installation for upgrades and the uninstaller: never change it.
AppId={{6C1E3D57-2B8A-4C1F-9E3B-5A7D0F4C2E91}
AppName=Captioneer
AppVersion={#AppVersion}
AppVerName=Captioneer {#AppVersion}
AppPublisher=Captioneer
DefaultDirName={autopf}\Captioneer
DefaultGroupName=Captioneer
DisableProgramGroupPage=yes
; Per-user by default (no administrator prompt); the dialog offers an all-users install.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
MinVersion=10.0
OutputDir=..\build
OutputBaseFilename=captioneer-{#AppVersion}-windows-x64-setup
SetupIconFile=..\build\captioneer.ico
UninstallDisplayIcon={app}\captioneer.exe
Compression=lzma2/max
SolidCompression=yes
WizardStyle=modern
; The app may be running during an upgrade or uninstall: let Setup ask it to close.
CloseApplications=yes

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[InstallDelete]
; An upgrade replaces the whole app folder, so files dropped by a newer PyInstaller do not linger.
Type: filesandordirs; Name: "{app}\_internal"

[Files]
Source: "{#BundleDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\Captioneer"; Filename: "{app}\captioneer.exe"
Name: "{autoprograms}\Captioneer dictation (start or stop)"; Filename: "{app}\captioneer.exe"; Parameters: "dictate --toggle"
Name: "{autodesktop}\Captioneer"; Filename: "{app}\captioneer.exe"; Tasks: desktopicon

[Run]
Filename: "{app}\captioneer.exe"; Description: "{cm:LaunchProgram,Captioneer}"; Flags: nowait postinstall skipifsilent

[Code]
{ Models, settings and logs live in %LOCALAPPDATA%\Captioneer (platformdirs); they survive an
  upgrade, and the uninstaller asks before deleting them. }
procedure CurUninstallStepChanged(CurUninstallStep: TUninstallStep);
var
  UserData: String;
begin
  if CurUninstallStep <> usPostUninstall then
    exit;
  UserData := ExpandConstant('{localappdata}\Captioneer');
  if (not UninstallSilent) and DirExists(UserData) then
    if MsgBox('Also delete the downloaded models, settings and logs in ' + UserData + '?',
              mbConfirmation, MB_YESNO or MB_DEFBUTTON2) = IDYES then
      DelTree(UserData, True, True, True);
end;
